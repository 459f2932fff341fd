#!/usr/bin/env bash
# Verifier for python-square-script: python3 /app/square.py N prints N squared for several N.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  [ -f /app/square.py ] || return 1
  for pair in "12 144" "-3 9" "0 0" "250 62500"; do
    set -- $pair
    [ "$(cd /tmp && timeout 10 python3 /app/square.py "$1" < /dev/null 2> /dev/null | tr -d ' \t\r')" = "$2" ] || return 1
  done
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
