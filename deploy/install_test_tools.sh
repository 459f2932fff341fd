#!/usr/bin/env bash
# Tools the test suite needs beyond the dev stack: headless Chromium renders the HTML
# report in a test. Idempotent; needs root (apt-get).
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
