#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
sed -i 's/foo/bar/g' /app/config.txt
