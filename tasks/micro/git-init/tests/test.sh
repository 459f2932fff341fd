#!/usr/bin/env bash
# Verifier for git-init: /app/project is the top level of a git repository.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  [ -d /app/project/.git ] && [ "$(git -C /app/project rev-parse --show-toplevel 2> /dev/null)" = /app/project ]
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
