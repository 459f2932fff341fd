#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
git -C /app/repo log -1 --format=%s > /app/last_message.txt
