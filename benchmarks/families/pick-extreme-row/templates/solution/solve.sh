#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
tail -n +2 /app/scores.txt | sort -t '%%{sep}' -k2,2n | %%{end} -n 1 | cut -d '%%{sep}' -f1 > /app/pick.txt
