#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
grep -c WARN /app/service.log > /app/warn_count.txt
