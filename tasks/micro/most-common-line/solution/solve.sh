#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
sort /app/votes.txt | uniq -c | sort -rn | head -n 1 | awk '{print $2}' > /app/winner.txt
