#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
echo 'export LOG_LEVEL=debug' > /app/settings.env
