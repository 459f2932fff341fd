#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
chmod 755 /app/public
