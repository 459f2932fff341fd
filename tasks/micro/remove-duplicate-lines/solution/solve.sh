#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
uniq /app/colors.txt > /app/unique.txt
