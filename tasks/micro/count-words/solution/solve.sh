#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
wc -w < /app/essay.txt > /app/word_count.txt
