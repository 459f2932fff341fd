#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
mv /app/incoming/*.log /app/logs/
