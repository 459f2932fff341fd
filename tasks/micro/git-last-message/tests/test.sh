#!/usr/bin/env bash
# Verifier for git-last-message: /app/last_message.txt holds the last commit's subject.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  [ -f /app/last_message.txt ] && [ "$(sed 's/^[[:space:]]*//; s/[[:space:]]*$//' /app/last_message.txt)" = "Fix typo in install guide" ]
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
