#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
printf 'import sys\nprint(int(sys.argv[1]) ** 2)\n' > /app/square.py
