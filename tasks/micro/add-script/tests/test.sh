#!/usr/bin/env bash
# Verifier for add-script: /app/add.sh A B prints A+B for several pairs.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  [ -f /app/add.sh ] && [ "$(stat -c %A /app/add.sh | cut -c4)" = x ] || return 1
  for pair in "10 32 42" "100 23 123" "7 -9 -2" "0 0 0"; do
    set -- $pair
    [ "$(cd /tmp && timeout 10 /app/add.sh "$1" "$2" < /dev/null 2> /dev/null | tr -d ' \t\r')" = "$3" ] || return 1
  done
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
