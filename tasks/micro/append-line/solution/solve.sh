#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
echo 'line 4' >> /app/notes.txt
