#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
cd /app/files
%%{listing} | xargs -d '\n' %%{algorithm}sum > /app/MANIFEST.%%{algorithm}
