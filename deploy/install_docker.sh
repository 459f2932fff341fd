#!/usr/bin/env bash
# Install Debian's Docker engine (docker.io) and debootstrap (for the base image).
#
# Used by `mindforge dev up` where dockerd is missing, and by CI. Idempotent: exits at
# once when dockerd, docker-init and debootstrap are all present. Needs root (apt-get).
# It only installs: starting dockerd is `mindforge dev up`'s job.
set -euo pipefail

PACKAGES=(docker.io tini debootstrap ca-certificates xz-utils)

if command -v dockerd >/dev/null && command -v debootstrap >/dev/null \
   && { command -v docker-init >/dev/null || [[ -x /usr/bin/docker-init ]]; }; then
  echo "install_docker: dockerd and debootstrap present"
  exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
  echo "install_docker: needs root (apt-get install ${PACKAGES[*]})" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"
echo "install_docker: installed ${PACKAGES[*]}"
