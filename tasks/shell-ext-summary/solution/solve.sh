#!/usr/bin/env bash
# Reference solution: NUL-separated find output, extension from the base name, awk sums.
set -euo pipefail
cat > /app/bin/extsum.sh <<'SH'
#!/bin/bash
# extsum.sh DIR - per-extension file count and total size (bytes) of regular files below DIR.
set -o pipefail
if [ "$#" -ne 1 ]; then
  echo "usage: extsum.sh DIR" >&2
  exit 2
fi
if [ ! -d "$1" ]; then
  echo "extsum.sh: not a directory: $1" >&2
  exit 2
fi
dir=$1
case $dir in -*) dir=./$dir ;; esac
# %f = base name, %s = size; records are NUL-terminated so any name is safe.
find "$dir" -type f -printf '%s/%f\0' |
  LC_ALL=C awk 'BEGIN { RS = "\0" }
    {
      slash = index($0, "/"); size = substr($0, 1, slash - 1); name = substr($0, slash + 1)
      ext = "(none)"
      dot = 0
      for (i = length(name); i > 0; i--) if (substr(name, i, 1) == ".") { dot = i; break }
      if (dot > 1 && dot < length(name)) ext = tolower(substr(name, dot + 1))
      n[ext]++; s[ext] += size
    }
    END { for (e in n) printf "%s %d %d\n", e, n[e], s[e] }' |
  LC_ALL=C sort
SH
chmod 755 /app/bin/extsum.sh
