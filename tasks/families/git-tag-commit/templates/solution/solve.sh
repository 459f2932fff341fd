#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
export GIT_COMMITTER_NAME=Dev GIT_COMMITTER_EMAIL=dev@example.com
git -C /app/repo tag %%{tagopts}%%{tag} main~%%{back}
