#!/bin/bash
# extsum.sh DIR - per-extension file count and total size
dir=$1
for f in $(find $dir -type f); do
  ext=${f##*.}
  size=$(wc -c < $f)
  echo "$ext $size"
done | awk '{c[$1]++; s[$1]+=$2} END {for (e in c) print e, c[e], s[e]}' | sort
