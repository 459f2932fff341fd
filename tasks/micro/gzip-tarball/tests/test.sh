#!/usr/bin/env bash
# Verifier for gzip-tarball: logs.tar.gz is gzip data and extracts to a logs/ tree equal to the original.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
# tree_equal DIR EXPECTED: same relative file names and contents.
tree_equal() { [ -d "$1" ] && diff -r -- "$1" "$2" > /dev/null; }
check() {
  gzip -t /app/logs.tar.gz 2> /dev/null || return 1
  out=$(mktemp -d)
  tar -xzf /app/logs.tar.gz -C "$out" 2> /dev/null || return 1
  # the archive may store logs/... or app/logs/... (when given the absolute path)
  tree_equal "$out/logs" /tests/logs || tree_equal "$out/app/logs" /tests/logs
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
