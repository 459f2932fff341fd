#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
sort -n /app/numbers.txt > /app/sorted_numbers.txt
