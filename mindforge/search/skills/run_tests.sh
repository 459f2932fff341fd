#!/usr/bin/env bash
# Find and run the project's own tests in DIR (default: .), printing a short summary.
# Usage: bash skills/run_tests.sh [DIR]
# Tries, in order: pytest (tests/ or test_*.py), `make test`, `npm test`, `cargo test`,
# `go test ./...`; prints which one ran and its exit code. Only the last 80 lines of
# the output are shown, where the summary is.
set -uo pipefail
dir="${1:-.}"
cd "$dir" || { echo "no such directory: $dir"; exit 2; }
run() {
  echo "running: $*"
  "$@" > /tmp/run_tests.out 2>&1
  code=$?
  tail -n 80 /tmp/run_tests.out
  echo "exit code of '$*': $code"
  exit "$code"
}
if compgen -G "test_*.py" > /dev/null || compgen -G "tests/*.py" > /dev/null || compgen -G "tests/**/*.py" > /dev/null; then
  if command -v pytest > /dev/null; then run pytest -q -x; fi
  run python3 -m pytest -q -x
fi
if [ -f Makefile ] && grep -qE '^test:' Makefile; then run make test; fi
if [ -f package.json ] && command -v npm > /dev/null; then run npm test --silent; fi
if [ -f Cargo.toml ] && command -v cargo > /dev/null; then run cargo test; fi
if [ -f go.mod ] && command -v go > /dev/null; then run go test ./...; fi
echo "no tests found under $(pwd)"
exit 1
