#!/usr/bin/env bash
# Verifier for make-nested-directories: /app/archive/2024/june is a directory.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  [ -d /app/archive/2024/june ]
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
