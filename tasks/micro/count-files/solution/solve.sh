#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
ls /app/photos | wc -l > /app/file_count.txt
