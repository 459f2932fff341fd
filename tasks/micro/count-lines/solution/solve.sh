#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
wc -l < /app/access.log > /app/line_count.txt
