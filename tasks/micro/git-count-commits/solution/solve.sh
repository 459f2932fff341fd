#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
git -C /app/repo rev-list --count HEAD > /app/commit_count.txt
