#!/usr/bin/env bash
# Verifier for list-tar-contents: contents.txt lists the archive's five paths (any order).
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  [ -f /app/contents.txt ] && [ "$(sed '/^$/d' /app/contents.txt | sort)" = "$(sort /tests/expected.txt)" ]
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
