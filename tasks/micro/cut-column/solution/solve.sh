#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
cut -d, -f2 /app/users.csv > /app/emails.txt
