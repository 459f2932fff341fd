#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
git -C /app/repo add README.md
git -C /app/repo commit -m 'Add README'
