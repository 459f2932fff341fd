#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
tar -czf /app/logs.tar.gz -C /app logs
