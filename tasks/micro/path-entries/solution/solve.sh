#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
echo "$PATH" | tr ':' '\n' > /app/path_dirs.txt
