#!/usr/bin/env bash
# Verifier entry point: run the checks; reward 1 when all pass, else 0.
# -c /dev/null, --rootdir and --noconftest keep config files or conftest.py planted by the
# agent (for example /pytest.ini with addopts) from changing what pytest runs.
mkdir -p /logs/verifier
if PYTHONDONTWRITEBYTECODE=1 python3 -m pytest -q -rA -c /dev/null --rootdir=/tests --noconftest \
    -p no:cacheprovider /tests/test_outputs.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
