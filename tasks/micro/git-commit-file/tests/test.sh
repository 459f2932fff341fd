#!/usr/bin/env bash
# Verifier for git-commit-file: the last commit of /app/repo is 'Add README' and holds README.md.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  cd /app/repo || return 1
  [ "$(git log -1 --format=%s 2> /dev/null)" = "Add README" ] || return 1
  git cat-file -p HEAD:README.md 2> /dev/null | cmp -s - /tests/README.md
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
