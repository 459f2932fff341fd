#!/usr/bin/env bash
# Verifier for rename-file: draft.txt was renamed to final.txt with its content intact.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  [ ! -e /app/draft.txt ] && cmp -s /app/final.txt /tests/draft.txt
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
