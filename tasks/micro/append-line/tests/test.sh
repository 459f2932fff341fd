#!/usr/bin/env bash
# Verifier for append-line: notes.txt holds lines 1 to 4.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
# same_text FILE EXPECTED: FILE exists and has EXPECTED's text (trailing newlines ignored).
same_text() { [ -f "$1" ] && [ "$(cat -- "$1")" = "$(cat -- "$2")" ]; }
check() {
  same_text /app/notes.txt /tests/expected.txt
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
