#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
git init /app/project
