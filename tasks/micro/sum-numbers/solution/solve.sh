#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
awk '{ s += $1 } END { print s }' /app/amounts.txt > /app/total.txt
