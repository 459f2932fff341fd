#!/usr/bin/env bash
# Build-time only: a repository whose main was reset and whose feature branch was deleted.
set -euo pipefail
export GIT_AUTHOR_NAME="Sam Lee" GIT_AUTHOR_EMAIL="sam@example.com"
export GIT_COMMITTER_NAME="Sam Lee" GIT_COMMITTER_EMAIL="sam@example.com"
n=0
commit() {  # $1 = file, $2 = content line, $3 = message
  n=$((n + 1))
  export GIT_AUTHOR_DATE="2024-04-0$(( (n + 1) / 2 ))T1$((n % 10)):00:00+00:00"
  export GIT_COMMITTER_DATE="$GIT_AUTHOR_DATE"
  mkdir -p "$(dirname "$1")"
  printf '%s\n' "$2" >> "$1"
  git add -A
  git commit -q -m "$3"
}
mkdir -p /app/project && cd /app/project
git init -q -b main
commit README.md "# notes-tool" "Initial commit"
commit src/parser.py "def parse(text): return text.split()" "Add parser"
git checkout -q -b feature/search
commit src/search.py "INDEX = {}" "Add search index"
commit src/cli.py "def search_cmd(q): pass" "Add search CLI"
commit src/search.py "FUZZY = True" "WIP: try fuzzy matching"
git reset -q --hard HEAD~1
commit tests/test_search.py "def test_search(): pass" "Add search tests"
git checkout -q main
commit src/parser.py "# handle empty input" "Fix parser edge case"
commit config.toml "[search]" "Add config file"
git branch -q -D feature/search
git reset -q --hard HEAD~2
git reflog expire --expire=now --all
