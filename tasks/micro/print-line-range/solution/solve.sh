#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
sed -n '10,20p' /app/book.txt > /app/excerpt.txt
