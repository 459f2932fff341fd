#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
touch /app/empty.txt
