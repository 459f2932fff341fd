#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
mv /app/draft.txt /app/final.txt
