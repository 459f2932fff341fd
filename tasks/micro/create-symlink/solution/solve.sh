#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
ln -s /app/releases/v2 /app/current
