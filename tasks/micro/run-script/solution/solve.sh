#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
bash /app/bin/report.sh > /app/report.txt
