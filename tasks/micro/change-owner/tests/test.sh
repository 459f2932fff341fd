#!/usr/bin/env bash
# Verifier for change-owner: /app/data.csv is owned by the user nobody.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  [ -f /app/data.csv ] && [ "$(stat -c %U /app/data.csv)" = nobody ]
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
