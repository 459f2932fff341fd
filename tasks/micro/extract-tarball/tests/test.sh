#!/usr/bin/env bash
# Verifier for extract-tarball: the archive's files are under /app/unpacked.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  cmp -s /app/unpacked/readme.txt /tests/bundle/readme.txt && cmp -s /app/unpacked/data/values.csv /tests/bundle/data/values.csv
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
