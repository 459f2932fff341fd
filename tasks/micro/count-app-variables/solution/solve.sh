#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
env | grep -c '^APP_' > /app/app_var_count.txt
