#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
sort -u /app/ips.txt | wc -l > /app/unique_count.txt
