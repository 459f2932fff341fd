#!/usr/bin/env bash
# Set everything up and run the test suite: .venv, the quality gate (ruff and mypy, configured
# in pyproject.toml, zero findings), the dev stack (Docker engine, base image, Temporal dev
# server, Ray), the test tools (headless Chromium), then pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/setup.sh
# the quality gate: any finding fails the run before the stack starts
# (tests/unit/test_quality_gate.py runs the same two commands under pytest)
gated=(mindforge workflows workers benchmarks)
.venv/bin/ruff check "${gated[@]}"
.venv/bin/mypy "${gated[@]}"
.venv/bin/mindforge dev up
bash deploy/install_test_tools.sh
exec .venv/bin/python -m pytest "$@"
