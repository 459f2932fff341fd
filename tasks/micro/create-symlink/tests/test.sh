#!/usr/bin/env bash
# Verifier for create-symlink: /app/current is a symbolic link resolving to /app/releases/v2.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  [ -L /app/current ] && [ "$(readlink -f /app/current)" = /app/releases/v2 ] && [ -d /app/releases/v2 ]
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
