#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
sort /app/names.txt > /app/sorted.txt
