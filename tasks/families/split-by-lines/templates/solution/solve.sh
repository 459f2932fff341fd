#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
mkdir -p /app/parts
split %%{suffix_opt}-l %%{chunk} /app/journal.txt /app/parts/part_
