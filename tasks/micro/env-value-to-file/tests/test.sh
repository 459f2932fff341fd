#!/usr/bin/env bash
# Verifier for env-value-to-file: /app/app_home.txt holds APP_HOME's value.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  [ -f /app/app_home.txt ] && [ "$(cat /app/app_home.txt)" = /opt/widget-7 ]
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
