#!/usr/bin/env bash
# Set everything up and run the test suite: .venv, the dev stack (Docker engine, base
# image, Temporal dev server, Ray), then pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/setup.sh
.venv/bin/mindforge dev up
exec .venv/bin/python -m pytest "$@"
