#!/usr/bin/env bash
# Set everything up and run the test suite: .venv, the documentation site (mkdocs build
# --strict: a broken link fails here), the quality gate (ruff and mypy, configured in
# pyproject.toml, zero findings), the dev stack (Docker engine, base image, Temporal dev
# server, Ray), the test tools (headless Chromium), a PostgreSQL server for the store's tests
# (MINDFORGE_TEST_POSTGRES_URL, set here so those tests fail rather than skip when it is
# missing), then pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/setup.sh
# the docs (mkdocs.yml), first because it takes a second: strict, so a broken link or anchor, or a
# page left out of the navigation, fails the run (not with --quiet, which hides the warnings strict
# counts); the site goes to site/ (git-ignored). NO_MKDOCS_2_WARNING quiets Material's banner.
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir site
# the quality gate: any finding fails the run before the stack starts
# (tests/unit/test_quality_gate.py runs the same two commands under pytest); ruff covers the
# tests too, mypy the four packages only
gated=(mindforge workflows workers benchmarks)
.venv/bin/ruff check "${gated[@]}" tests
.venv/bin/mypy "${gated[@]}"
.venv/bin/mindforge dev up
# the worker image (deploy/worker.Dockerfile) from the local base image: the cluster tests run on it
# and the KubeRay manifests name it; skipped while its content-hash tag exists (a fresh build: ~3 min)
.venv/bin/mindforge cluster image
bash deploy/install_test_tools.sh
# a variable already set (a server elsewhere) is kept; the script's failure stops the run
if [[ -z "${MINDFORGE_TEST_POSTGRES_URL:-}" ]]; then
  MINDFORGE_TEST_POSTGRES_URL="$(bash deploy/install_postgres.sh)"
fi
export MINDFORGE_TEST_POSTGRES_URL
exec .venv/bin/python -m pytest "$@"
