#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
mkdir -p /app/out
python3 -c 'import json, sys
for r in json.load(open(sys.argv[1])):
    print(%%{pyexpr}[sys.argv[2]])' /app/data/people.json %%{field} > /app/out/%%{field}.txt
