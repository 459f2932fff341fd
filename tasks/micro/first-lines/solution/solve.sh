#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
head -n 5 /app/data.txt > /app/top5.txt
