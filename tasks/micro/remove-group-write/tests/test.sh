#!/usr/bin/env bash
# Verifier for remove-group-write: every file in /app/shared has mode 644.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
# mode_of PATH: octal permission bits, e.g. 644.
mode_of() { stat -c %a -- "$1"; }
check() {
  for f in budget.xlsx plan.md team.txt todo.txt; do
    [ -f "/app/shared/$f" ] && [ "$(mode_of "/app/shared/$f")" = 644 ] || return 1
  done
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
