#!/usr/bin/env bash
# Reference solution: verify each bundle against the manifest, inspect every member with
# Python's tarfile before extracting, and extract only vetted archives.
set -euo pipefail
mkdir -p /app/releases
python3 - <<'PY'
import hashlib
import os
import tarfile
from pathlib import Path, PurePosixPath

incoming, releases = Path("/app/incoming"), Path("/app/releases")
manifest = {}
for line in (incoming / "SHA256SUMS").read_text().splitlines():
    parts = line.split(None, 1)
    if len(parts) == 2 and len(parts[0]) == 64:
        manifest[parts[1].lstrip("*").strip()] = parts[0].lower()


def safe(tar_path):
    try:
        with tarfile.open(tar_path, "r:gz") as tf:
            members = tf.getmembers()
            for m in members:
                p = PurePosixPath(m.name)
                if p.is_absolute() or ".." in p.parts or not (m.isreg() or m.isdir()):
                    return None
            return members
    except (tarfile.TarError, OSError, EOFError):
        return None


rejected = []
for bundle in sorted(incoming.glob("*.tar.gz")):
    digest = hashlib.sha256(bundle.read_bytes()).hexdigest()
    members = safe(bundle) if manifest.get(bundle.name) == digest else None
    if members is None:
        rejected.append(bundle.name)
        continue
    dest = releases / bundle.name[: -len(".tar.gz")]
    dest.mkdir()
    with tarfile.open(bundle, "r:gz") as tf:
        tf.extractall(dest, members=members)
(releases / "REJECTED").write_text("".join(f"{n}\n" for n in rejected))
PY
