#!/usr/bin/env bash
# Reference solution: one Perl-compatible regex with look-around, numeric sort by octets.
set -euo pipefail
cat > /app/extract_ips.sh <<'SH'
#!/bin/bash
# Print the distinct, well-delimited IPv4 addresses in stdin, numerically sorted.
octet='(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])'
grep -aoP "(?<![A-Za-z0-9_.])${octet}(?:\\.${octet}){3}(?![A-Za-z0-9_]|\\.[0-9])" |
  LC_ALL=C sort -u -t . -k1,1n -k2,2n -k3,3n -k4,4n
exit 0
SH
chmod 755 /app/extract_ips.sh
/app/extract_ips.sh < /app/data/notes.txt > /app/ips.txt
