#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
for f in /app/inbox/*.%%{old}; do mv -- "$f" "${f%.%%{old}}.%%{new}"; done
