#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
chown nobody /app/data.csv
