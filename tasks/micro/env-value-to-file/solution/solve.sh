#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
echo "$APP_HOME" > /app/app_home.txt
