#!/usr/bin/env bash
# Set everything up and run the test suite: .venv, the dev stack (Docker engine, base
# image, Temporal dev server, Ray), the test tools (headless Chromium), then pytest.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/setup.sh
.venv/bin/mindforge dev up
bash deploy/install_test_tools.sh
exec .venv/bin/python -m pytest "$@"
