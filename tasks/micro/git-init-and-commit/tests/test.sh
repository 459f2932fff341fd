#!/usr/bin/env bash
# Verifier for git-init-and-commit: /app/site is a repository whose last commit 'Initial commit' holds all three files.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  cd /app/site || return 1
  [ "$(git rev-parse --show-toplevel 2> /dev/null)" = /app/site ] || return 1
  [ "$(git log -1 --format=%s 2> /dev/null)" = "Initial commit" ] || return 1
  [ "$(git ls-tree -r --name-only HEAD 2> /dev/null)" = "$(cat /tests/expected.txt)" ]
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
