#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
tar -cf /app/backup.tar -C /app docs
