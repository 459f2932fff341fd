#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
grep -v '^#' /app/settings.conf > /app/active.conf
