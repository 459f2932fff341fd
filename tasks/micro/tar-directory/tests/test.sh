#!/usr/bin/env bash
# Verifier for tar-directory: backup.tar extracts to a docs/ tree equal to the original.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
# tree_equal DIR EXPECTED: same relative file names and contents.
tree_equal() { [ -d "$1" ] && diff -r -- "$1" "$2" > /dev/null; }
check() {
  out=$(mktemp -d)
  tar -xf /app/backup.tar -C "$out" 2> /dev/null || return 1
  # the archive may store docs/... or app/docs/... (when given the absolute path)
  tree_equal "$out/docs" /tests/docs || tree_equal "$out/app/docs" /tests/docs
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
