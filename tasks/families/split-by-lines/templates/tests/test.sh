#!/usr/bin/env bash
# Verifier: check.py recomputes the truth from the instance's generator.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /logs/verifier
if python3 /tests/check.py; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
