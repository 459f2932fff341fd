#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
gzip /app/big.log
