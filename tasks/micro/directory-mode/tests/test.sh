#!/usr/bin/env bash
# Verifier for directory-mode: /app/public has mode 755.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
# mode_of PATH: octal permission bits, e.g. 644.
mode_of() { stat -c %a -- "$1"; }
check() {
  [ -d /app/public ] && [ "$(mode_of /app/public)" = 755 ]
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
