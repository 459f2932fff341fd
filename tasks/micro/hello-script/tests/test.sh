#!/usr/bin/env bash
# Verifier for hello-script: /app/hello.sh is executable and prints the line.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  [ -f /app/hello.sh ] && [ "$(stat -c %A /app/hello.sh | cut -c4)" = x ] || return 1
  [ "$(cd /tmp && timeout 10 /app/hello.sh < /dev/null 2> /dev/null)" = "Hello from a script" ]
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
