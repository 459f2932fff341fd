#!/usr/bin/env bash
# Find files by name pattern and, optionally, by content.
# Usage: bash skills/find_files.sh NAME_GLOB [TEXT] [DIR]
#   bash skills/find_files.sh '*.py'            # every Python file under .
#   bash skills/find_files.sh '*.conf' listen /etc  # .conf files under /etc containing "listen"
# Prints one path per line (with matching line numbers when TEXT is given);
# skips .git, __pycache__ and node_modules; at most 200 results.
set -euo pipefail
glob="${1:?usage: find_files.sh NAME_GLOB [TEXT] [DIR]}"
text="${2:-}"
dir="${3:-.}"
find "$dir" \( -name .git -o -name __pycache__ -o -name node_modules \) -prune -o -type f -name "$glob" -print 2>/dev/null \
  | LC_ALL=C sort \
  | while IFS= read -r path; do
      if [ -z "$text" ]; then
        echo "$path"
      else
        grep -n -F -- "$text" "$path" 2>/dev/null | head -n 5 | sed "s|^|$path:|" || true
      fi
    done \
  | head -n 200
