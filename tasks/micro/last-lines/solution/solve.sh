#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
tail -n 3 /app/server.log > /app/last3.txt
