#!/usr/bin/env bash
# Print lines FROM..TO of FILE with line numbers (default: the first 100 lines), so a
# long file can be read in pieces instead of being cut by the observation limit.
# Usage: bash skills/show_lines.sh FILE [FROM] [TO]
set -euo pipefail
file="${1:?usage: show_lines.sh FILE [FROM] [TO]}"
from="${2:-1}"
to="${3:-$((from + 99))}"
total="$(wc -l < "$file")"
echo "$file: lines $from-$to of $total"
awk -v from="$from" -v to="$to" 'NR >= from && NR <= to { printf "%6d  %s\n", NR, $0 } NR > to { exit }' "$file"
