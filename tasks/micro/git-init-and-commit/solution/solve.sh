#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
git init /app/site
git -C /app/site add .
git -C /app/site commit -m 'Initial commit'
