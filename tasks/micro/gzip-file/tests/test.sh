#!/usr/bin/env bash
# Verifier for gzip-file: big.log.gz is gzip data that decompresses to the original big.log.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  [ -f /app/big.log.gz ] && gzip -t /app/big.log.gz 2> /dev/null && gzip -dc /app/big.log.gz | cmp -s - /tests/big.log
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
