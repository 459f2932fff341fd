#!/usr/bin/env bash
# Verifier for count-matching-lines: /app/warn_count.txt holds 6.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
# number_in FILE N [INPUT]: FILE holds just the number N (blanks ignored), or N and the input's
# name as wc prints it ("N INPUT").
number_in() {
  [ -f "$1" ] || return 1
  local got
  got=$(tr -s ' \t\r\n' ' ' < "$1" | sed 's/^ //; s/ $//')
  [ "$got" = "$2" ] || { [ -n "${3:-}" ] && [ "$got" = "$2 $3" ]; }
}
check() {
  number_in /app/warn_count.txt 6
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
