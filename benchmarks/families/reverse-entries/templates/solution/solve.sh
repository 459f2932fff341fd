#!/usr/bin/env bash
# Reference solution.
set -euo pipefail
(head -n %%{header_lines} /app/%%{log}.log; tail -n +%%{first_entry} /app/%%{log}.log | tac) > /app/newest_first.log
