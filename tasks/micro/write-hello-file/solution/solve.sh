#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
echo 'Hello, World!' > /app/hello.txt
