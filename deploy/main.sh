#!/usr/bin/env bash
# Set everything up and run the main job: a lineage of as many generations as fit its time budget on instances of
# the task families in tasks/families (12 micro tasks read as sealed tasks), through Temporal and Ray, against the embedded policy server (SmolLM2-135M-Instruct
# on llama.cpp by default; --model tiny is the smoke run, a few minutes). Extra arguments go to
# `mindforge quickstart` (e.g. --model Qwen/Qwen2.5-0.5B-Instruct, --policy-url http://host:8000/v1
# for a running vLLM).
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/setup.sh
.venv/bin/mindforge dev up
exec .venv/bin/mindforge quickstart "$@"
