#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
chmod +x /app/run.sh
