#!/usr/bin/env bash
# Reference solution: drop every line holding a credential from every commit (tags rewritten
# too), then delete the backup refs, expire reflogs and prune the old objects.
set -euo pipefail
cd /app/repo
export FILTER_BRANCH_SQUELCH_WARNING=1
git filter-branch --force \
  --tree-filter 'git ls-files -z | xargs -0 -r grep -lZ -e AKIAZ7QXMINDFORGE42 -e q9Vt3Kx7/Lm2PwR8 | xargs -0 -r sed -i -e "/AKIAZ7QXMINDFORGE42/d" -e "/q9Vt3Kx7\/Lm2PwR8/d"' \
  --tag-name-filter cat -- --all
git for-each-ref --format='%(refname)' refs/original | while read -r ref; do git update-ref -d "$ref"; done
git reflog expire --expire=now --all
git gc --quiet --prune=now
git checkout -q main
