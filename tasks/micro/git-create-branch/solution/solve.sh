#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
git -C /app/repo branch feature
