#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
rm /app/tmp/cache.bin
