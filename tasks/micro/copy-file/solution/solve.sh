#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
cp /app/config.ini /app/config.ini.bak
