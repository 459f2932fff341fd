#!/usr/bin/env bash
# Build-time only: create /app/repo with a fixed history (deleted after the build step).
set -euo pipefail
export GIT_AUTHOR_NAME="Dana Ortiz" GIT_AUTHOR_EMAIL="dana@example.com"
export GIT_COMMITTER_NAME="Dana Ortiz" GIT_COMMITTER_EMAIL="dana@example.com"
KEY_ID="AKIAZ7QXMINDFORGE42"
SECRET="q9Vt3Kx7/Lm2PwR8+YsN4bJd6HcF0gTzUeA1oIiE"
commit() {  # $1 = date, $2 = message
  export GIT_AUTHOR_DATE="$1" GIT_COMMITTER_DATE="$1"
  git add -A
  git commit -q -m "$2"
}
mkdir -p /app/repo && cd /app/repo
git init -q -b main
mkdir -p app deploy scripts docs
printf '# orbit\n\nA tiny service that syncs reports to object storage.\n' > README.md
printf '' > app/__init__.py
printf 'from app.config import load\n\n\ndef main():\n    cfg = load()\n    print("orbit starting in", cfg["REGION"])\n' > app/main.py
commit "2024-03-01T09:00:00+00:00" "Initial commit"

cat > app/config.py <<'PY'
import os


def load(path="deploy/prod.env"):
    cfg = {}
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, value = line.partition("=")
                cfg[key] = value
    return cfg
PY
commit "2024-03-02T10:15:00+00:00" "Add config loader"

cat > deploy/prod.env <<ENV
# production settings
REGION=eu-west-1
LOG_LEVEL=info
AWS_ACCESS_KEY_ID=$KEY_ID
AWS_SECRET_ACCESS_KEY=$SECRET
WORKERS=4
ENV
cat > scripts/deploy.sh <<SH
#!/bin/sh
set -e
export AWS_ACCESS_KEY_ID=$KEY_ID
export AWS_SECRET_ACCESS_KEY=$SECRET
aws s3 sync ./reports "s3://orbit-reports/\$(date +%F)/"
SH
chmod +x scripts/deploy.sh
commit "2024-03-03T16:40:00+00:00" "Add production settings and deploy script"
GIT_COMMITTER_DATE="2024-03-03T17:00:00+00:00" git tag -a v0.1 -m "Release 0.1"

cat > deploy/prod.env <<'ENV'
# production settings
# credentials come from the environment (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)
REGION=eu-west-1
LOG_LEVEL=info
WORKERS=4
ENV
cat > scripts/deploy.sh <<'SH'
#!/bin/sh
set -e
: "${AWS_ACCESS_KEY_ID:?set AWS_ACCESS_KEY_ID}" "${AWS_SECRET_ACCESS_KEY:?set AWS_SECRET_ACCESS_KEY}"
aws s3 sync ./reports "s3://orbit-reports/$(date +%F)/"
SH
commit "2024-03-04T08:05:00+00:00" "Read credentials from the environment"

git branch feature/metrics
cat > docs/deploy.md <<'MD'
# Deploying

Export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, then run `scripts/deploy.sh`.
MD
commit "2024-03-05T11:30:00+00:00" "Document deployment"

git checkout -q feature/metrics
cat > app/metrics.py <<'PY'
import time

STARTED = time.time()


def uptime_seconds():
    return time.time() - STARTED
PY
commit "2024-03-06T13:20:00+00:00" "Add uptime metric"
printf 'WORKERS=8\n' >> deploy/prod.env
commit "2024-03-07T09:45:00+00:00" "Scale workers for metrics load"
git checkout -q main
git gc -q
