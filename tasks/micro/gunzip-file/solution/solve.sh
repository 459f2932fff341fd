#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
gunzip /app/sales.csv.gz
