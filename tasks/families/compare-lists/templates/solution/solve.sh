#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
export LC_ALL=C
comm %%{columns} <(sort /app/first.txt) <(sort /app/second.txt) > /app/result.txt
