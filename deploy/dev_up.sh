#!/usr/bin/env bash
# Bring the dev stack up from a fresh checkout: Docker (installed where missing), the
# base image, the image-map switch, then whatever else `mindforge dev up` manages.
# Extra arguments go to `mindforge dev up` (e.g. -c docker).
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install_docker.sh
bash deploy/setup.sh
exec .venv/bin/mindforge dev up "$@"
