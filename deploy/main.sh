#!/usr/bin/env bash
# Set everything up and run the main job. Extra arguments go to the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/setup.sh
.venv/bin/mindforge dev up
exec .venv/bin/mindforge tasks validate tasks/ "$@"
