#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
NAME=Ada /app/bin/greet > /app/greeting.txt
