#!/usr/bin/env bash
# Verifier for private-key-mode: /app/secret.key has mode 600.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
# mode_of PATH: octal permission bits, e.g. 644.
mode_of() { stat -c %a -- "$1"; }
check() {
  [ -f /app/secret.key ] && [ "$(mode_of /app/secret.key)" = 600 ]
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
