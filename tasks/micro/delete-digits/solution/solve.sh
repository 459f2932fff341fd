#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
tr -d '0-9' < /app/mixed.txt > /app/letters.txt
