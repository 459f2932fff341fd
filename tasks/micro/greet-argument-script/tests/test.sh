#!/usr/bin/env bash
# Verifier for greet-argument-script: /app/greet.sh NAME prints Hello, NAME! for several names.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  [ -f /app/greet.sh ] && [ "$(stat -c %A /app/greet.sh | cut -c4)" = x ] || return 1
  for name in Bob Mallory Zhang; do
    [ "$(cd /tmp && timeout 10 /app/greet.sh "$name" < /dev/null 2> /dev/null)" = "Hello, $name!" ] || return 1
  done
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
