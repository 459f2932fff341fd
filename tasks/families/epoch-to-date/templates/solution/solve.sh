#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
while read -r stamp; do
  LC_ALL=C date -u -d "@$stamp" '+%%{pattern}'
done < /app/epochs.txt > /app/dates.txt
