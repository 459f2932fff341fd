#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
awk -F '%%{sep}' 'NR > 1 { total[$1] += $2 } END { for (k in total) print k, total[k] }' /app/sales.txt \
  | LC_ALL=C sort -k1,1 > /app/totals.txt
