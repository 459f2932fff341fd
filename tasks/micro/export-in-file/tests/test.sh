#!/usr/bin/env bash
# Verifier for export-in-file: sourcing settings.env exports LOG_LEVEL=debug to child processes.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  [ -f /app/settings.env ] || return 1
  got=$(env -u LOG_LEVEL bash -c 'source /app/settings.env > /dev/null 2>&1; printenv LOG_LEVEL')
  [ "$got" = debug ]
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
