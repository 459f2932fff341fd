#!/usr/bin/env bash
# Reference solution: drop every line that assigns a literal credential value, in every
# commit (tags rewritten too); then delete the backup refs, expire reflogs and prune.
# Lines that only name the variables (comments, "${AWS_SECRET_ACCESS_KEY:?...}") stay.
set -euo pipefail
cd /app/repo
export FILTER_BRANCH_SQUELCH_WARNING=1
pattern='^(export )?AWS_(ACCESS_KEY_ID|SECRET_ACCESS_KEY)=[^$]'
git filter-branch --force \
  --tree-filter "git ls-files -z | xargs -0 -r grep -lZE '$pattern' | xargs -0 -r sed -i -E '/$pattern/d'" \
  --tag-name-filter cat -- --all
git for-each-ref --format='%(refname)' refs/original | while read -r ref; do git update-ref -d "$ref"; done
git reflog expire --expire=now --all
git gc --quiet --prune=now
git checkout -q main
