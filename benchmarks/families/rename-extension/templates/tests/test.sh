#!/usr/bin/env bash
# Verifier: the instance's input script recomputes the truth and compares.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
if python3 /tests/inputs --check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
