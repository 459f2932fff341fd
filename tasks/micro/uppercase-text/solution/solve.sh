#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
tr a-z A-Z < /app/shout.txt > /app/upper.txt
