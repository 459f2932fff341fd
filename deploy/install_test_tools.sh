#!/usr/bin/env bash
# Tools the test suite needs beyond the dev stack: headless Chromium renders the HTML
# report in a test; iproute2's `ip` makes the bridge of the private dockerd one dev-stack
# test starts (PostgreSQL for the store's tests: install_postgres.sh). Idempotent; needs
# root (apt-get).
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
if ((${#missing[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
