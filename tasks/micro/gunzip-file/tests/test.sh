#!/usr/bin/env bash
# Verifier for gunzip-file: /app/sales.csv is the decompressed CSV.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  cmp -s /app/sales.csv /tests/sales.csv
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
