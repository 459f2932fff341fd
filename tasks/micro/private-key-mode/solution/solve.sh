#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
chmod 600 /app/secret.key
