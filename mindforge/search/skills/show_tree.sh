#!/usr/bin/env bash
# Print the directory tree under DIR (default: .) down to DEPTH levels (default: 3),
# with file sizes in bytes; skips .git, __pycache__ and node_modules.
# Usage: bash skills/show_tree.sh [DIR] [DEPTH]
set -euo pipefail
dir="${1:-.}"
depth="${2:-3}"
prefix="${dir%/}/"
find "$dir" -mindepth 1 -maxdepth "$depth" \
    \( -name .git -o -name __pycache__ -o -name node_modules \) -prune -o -print \
  | LC_ALL=C sort \
  | while IFS= read -r path; do
      rel="${path#"$prefix"}"
      slashes="${rel//[!\/]/}"
      indent="$(printf '%*s' $((${#slashes} * 2)) '')"
      if [ -d "$path" ]; then
        echo "${indent}${rel##*/}/"
      else
        echo "${indent}${rel##*/} ($(stat -c %s "$path") bytes)"
      fi
    done
