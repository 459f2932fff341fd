#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
find /app/project -type f -name '*.py' | wc -l > /app/py_count.txt
