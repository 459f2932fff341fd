#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
mkdir -p /app/archive/2024/june
