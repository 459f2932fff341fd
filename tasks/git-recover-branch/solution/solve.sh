#!/usr/bin/env bash
# Reference solution: the lost tips are unreachable commits; find them with fsck and pick
# them by subject (the tests commit is the feature tip; the WIP commit was abandoned).
set -euo pipefail
cd /app/project
lost=$(git fsck --no-reflogs --unreachable --no-progress 2>/dev/null | awk '$2 == "commit" {print $3}')
pick() {  # $1 = subject
  for c in $lost; do
    if [ "$(git log -1 --format=%s "$c")" = "$1" ]; then echo "$c"; return 0; fi
  done
  return 1
}
main_tip=$(pick "Add config file")
search_tip=$(pick "Add search tests")
git branch feature/search "$search_tip"
git reset -q --hard "$main_tip"
