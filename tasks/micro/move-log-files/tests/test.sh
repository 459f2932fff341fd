#!/usr/bin/env bash
# Verifier for move-log-files: the three .log files are in /app/logs, none left in /app/incoming, readme.txt stays.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  for n in api worker cron; do cmp -s /app/logs/$n.log /tests/$n.log || return 1; done
  [ -z "$(find /app/incoming -name '*.log')" ] && [ -f /app/incoming/readme.txt ]
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
