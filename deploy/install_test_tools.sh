#!/usr/bin/env bash
# Tools the test suite needs beyond the dev stack: headless Chromium renders the HTML
# report in a test; iproute2's `ip` makes the bridge of the private dockerd one dev-stack
# test starts; nginx terminates TLS (and checks client certificates and an API key) in
# front of a Temporal dev server, which speaks only plaintext, for the TLS-only lineage test;
# openssl makes that test's certificates (PostgreSQL for the store's tests:
# install_postgres.sh). Idempotent; needs root (apt-get).
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v nginx >/dev/null 2>&1 || [[ -x /usr/sbin/nginx ]] || missing+=(nginx-light)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
if ((${#missing[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
