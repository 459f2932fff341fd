#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
find /app/store -type f -size +%%{limit_kib}k -print0 | LC_ALL=C sort -z | tr '\0' '\n' > /app/large_files.txt
