#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
grep ERROR /app/app.log > /app/errors.txt
