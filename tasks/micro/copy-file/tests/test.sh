#!/usr/bin/env bash
# Verifier for copy-file: /app/config.ini.bak is a copy of config.ini and the original is unchanged.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  cmp -s /app/config.ini.bak /tests/config.ini && cmp -s /app/config.ini /tests/config.ini
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
