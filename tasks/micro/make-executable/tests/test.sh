#!/usr/bin/env bash
# Verifier for make-executable: /app/run.sh is executable by its owner and runs.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  [ "$(stat -c %A /app/run.sh | cut -c4)" = x ] && [ "$(/app/run.sh)" = "run ok" ]
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
