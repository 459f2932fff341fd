#!/usr/bin/env bash
# Verifier for git-create-branch: branch feature exists and points at main's commit.
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0. The fixed PATH keeps
# programs the agent may have planted (e.g. in /usr/local/bin) out of the checks.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
cd /
check() {
  cd /app/repo || return 1
  feature=$(git rev-parse --verify -q refs/heads/feature) || return 1
  [ "$feature" = "$(git rev-parse --verify -q refs/heads/main)" ]
}

if check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
