#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
tr -s '%%{char}' < /app/raw.txt > /app/clean.txt
