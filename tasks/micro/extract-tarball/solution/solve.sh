#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
mkdir -p /app/unpacked
tar -xzf /app/bundle.tar.gz -C /app/unpacked
