#!/usr/bin/env bash
# Build the local Debian base image from Debian's packages (debootstrap + docker import).
#
# Public task Dockerfiles start FROM registry images; on a host that cannot reach a
# registry the image map points them at this image. It carries the host's locally added
# CA certificates (/usr/local/share/ca-certificates/*.crt) so that apt and pip inside task
# builds trust a TLS-intercepting proxy.
#
# Usage: deploy/build_base_image.sh [TAG]   (default mindforge/base:bookworm)
# Environment: MINDFORGE_BASE_PACKAGES (comma-separated debootstrap --include list),
# MINDFORGE_BASE_SUITE, MINDFORGE_DEBIAN_MIRROR, MINDFORGE_REBUILD_BASE=1 to rebuild.
# Idempotent: exits at once when the tag exists and MINDFORGE_REBUILD_BASE is unset.
set -euo pipefail

TAG="${1:-${MINDFORGE_BASE_IMAGE:-mindforge/base:bookworm}}"
SUITE="${MINDFORGE_BASE_SUITE:-bookworm}"
MIRROR="${MINDFORGE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PACKAGES="${MINDFORGE_BASE_PACKAGES:-python3,python3-pytest,python3-pip,python3-venv,python-is-python3,tmux,procps,curl,ca-certificates,git,sqlite3,less,xz-utils}"

if [[ -z "${MINDFORGE_REBUILD_BASE:-}" ]] && docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "base image $TAG present"
  exit 0
fi

command -v debootstrap >/dev/null || { echo "debootstrap missing: apt-get install -y debootstrap" >&2; exit 1; }

ROOTFS="$(mktemp -d /tmp/mindforge-rootfs.XXXXXX)"
trap 'rm -rf "$ROOTFS"' EXIT

echo "debootstrap $SUITE (minbase) into $ROOTFS ..."
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR" >/tmp/mindforge-debootstrap.log 2>&1 \
  || { tail -n 30 /tmp/mindforge-debootstrap.log >&2; exit 1; }

# Trust the host's locally added CA certificates (TLS-intercepting proxies).
mkdir -p "$ROOTFS/usr/local/share/ca-certificates"
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$ROOTFS/usr/local/share/ca-certificates/"
fi
chroot "$ROOTFS" update-ca-certificates >/dev/null

# Public bases (python:3.x) let `pip install` into the system interpreter; so does this one.
rm -f "$ROOTFS"/usr/lib/python3*/EXTERNALLY-MANAGED
# Keep the image small: apt lists and caches are fetched again by `apt-get update`.
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/archives/*.deb
cp /etc/apt/sources.list.d/debian.sources "$ROOTFS/etc/apt/sources.list.d/" 2>/dev/null || true

echo "docker import -> $TAG"
tar -C "$ROOTFS" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV DEBIAN_FRONTEND=noninteractive' \
  --change 'CMD ["/bin/bash"]' \
  - "$TAG" >/dev/null
echo "built $TAG"
