#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
tar -tf /app/release.tar > /app/contents.txt
