"""The worker image (``deploy/worker.Dockerfile``), built from the local base image with no registry.

``mindforge cluster up`` runs every Ray node on it and the KubeRay manifests name it. Its
packages are the building venv's, version for version: a Ray Client driver and the nodes
must run the same Ray (Ray refuses a client of another version) and should unpickle the
same pydantic. So the build context holds

* ``constraints.txt``: every distribution installed in this venv, ``name==version``;
* ``requirements.txt``: MindForge's own dependencies (``pyproject.toml``, core plus the
  chosen extras) and its build backend;
* ``wheels/``: the wheels pip resolves for those under those constraints, downloaded on
  this machine through its pip configuration (its indexes, caches and proxy) and kept in
  :func:`wheel_cache` by the hash of the two files above; the image installs them offline;
* ``src/``: :data:`SOURCES` of the checkout.

The image is tagged ``mindforge/worker:<content hash>`` (:func:`content_hash`: the
Dockerfile, the base image's id, the requirements, constraints and sources) and
``mindforge/worker:latest``; a build whose tag exists is skipped, so the minutes a fresh
build takes are paid once per change of code or packages.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors

from mindforge.devstack.base import DevStackError, Say
from mindforge.settings import REPO_ROOT

WORKER_REPOSITORY = "mindforge/worker"
DOCKERFILE = REPO_ROOT / "deploy" / "worker.Dockerfile"
#: what of the checkout the image holds (under ``/opt/mindforge``): code, the bundled tasks and
#: contracts, the image map, and what ``pip install -e`` reads
SOURCES = (
    "pyproject.toml", "README.md", "mindforge", "workers", "workflows", "hcp_contracts", "tasks",
    "deploy/image_map.toml",
)
#: the extras the cluster's image installs: Postgres's driver (the Temporal worker Deployments
#: use the store); ``train`` (torch) only where Ray nodes train adapters
DEFAULT_EXTRAS = ("postgres",)
#: the image label holding the content hash
HASH_LABEL = "mindforge.worker.content_hash"
_SKIP = re.compile(r"(^|/)(__pycache__|[^/]*\.egg-info)(/|$)|\.py[co]$")


def requirements(extras: tuple[str, ...] = DEFAULT_EXTRAS, root: Path = REPO_ROOT) -> list[str]:
    """MindForge's declared dependencies (core plus ``extras``) and its build backend, as pip lines.

    Raises:
        DevStackError: an extra ``pyproject.toml`` does not declare.
    """
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    lines = list(project["project"]["dependencies"])
    optional = project["project"].get("optional-dependencies", {})
    for extra in extras:
        if extra not in optional:
            raise DevStackError(f"pyproject.toml declares no extra {extra!r} (it has {', '.join(sorted(optional))})")
        lines += optional[extra]
    lines += project["build-system"]["requires"]
    return sorted(set(lines))


def constraints() -> list[str]:
    """Every distribution of this interpreter's environment as ``name==version``, MindForge itself left out."""
    pins = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name and name.lower() != "mindforge":
            pins.add(f"{re.sub(r'[-_.]+', '-', name).lower()}=={dist.version}")
    return sorted(pins)


def source_files(root: Path = REPO_ROOT) -> list[Path]:
    """The files of :data:`SOURCES` under ``root``, relative to it, sorted (caches and build metadata left out).

    Raises:
        DevStackError: a source is missing.
    """
    found: list[Path] = []
    for name in SOURCES:
        path = root / name
        if path.is_file():
            found.append(Path(name))
        elif path.is_dir():
            found += [
                p.relative_to(root) for p in path.rglob("*")
                if p.is_file() and not p.is_symlink() and not _SKIP.search(p.relative_to(root).as_posix())
            ]
        else:
            raise DevStackError(f"{path} is missing: the worker image is built from a whole checkout")
    return sorted(found)


def content_hash(base_id: str, reqs: list[str], pins: list[str], files: list[Path], root: Path = REPO_ROOT) -> str:
    """sha256 (hex) of what makes the image: the Dockerfile, the base image id, requirements, constraints, sources.

    Args:
        base_id: the base image's id (``sha256:...``).
        reqs: :func:`requirements`.
        pins: :func:`constraints`.
        files: :func:`source_files`, relative to ``root``.
        root: the checkout.
    """
    digest = hashlib.sha256()
    for part in (DOCKERFILE.read_bytes(), base_id.encode(), "\n".join(reqs).encode(), "\n".join(pins).encode()):
        digest.update(hashlib.sha256(part).digest())
    for rel in files:
        digest.update(rel.as_posix().encode() + b"\0")
        digest.update(hashlib.sha256((root / rel).read_bytes()).digest())
    return digest.hexdigest()


def wheel_cache() -> Path:
    """Where downloaded wheels are kept: ``$XDG_CACHE_HOME/mindforge/worker-wheels`` (default ``~/.cache``)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "mindforge" / "worker-wheels"


def fetch_wheels(reqs: list[str], pins: list[str], say: Say) -> Path:
    """The wheels of ``reqs`` under ``pins``, downloaded once per (reqs, pins) into :func:`wheel_cache`.

    pip resolves with this machine's configuration (indexes, cache, proxy) and only binary
    wheels, so the image's install needs no compiler and no network.

    Returns:
        the folder holding them.

    Raises:
        DevStackError: pip could not resolve or download them (its last lines).
    """
    key = hashlib.sha256(("\n".join(reqs) + "\0" + "\n".join(pins)).encode()).hexdigest()[:20]
    folder = wheel_cache() / key
    if (folder / ".complete").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    say(f"downloading the worker image's wheels into {folder} (pip, this machine's configuration) ...")
    with tempfile.TemporaryDirectory(prefix="mf-wheels-", dir=folder.parent) as tmp:
        (Path(tmp) / "requirements.txt").write_text("\n".join(reqs) + "\n", encoding="utf-8")
        (Path(tmp) / "constraints.txt").write_text("\n".join(pins) + "\n", encoding="utf-8")
        cmd = [
            sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--only-binary=:all:",
            "--dest", str(Path(tmp) / "wheels"), "-r", str(Path(tmp) / "requirements.txt"),
            "-c", str(Path(tmp) / "constraints.txt"),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).splitlines()[-12:])
            raise DevStackError(f"pip could not fetch the worker image's wheels:\n{tail}")
        if folder.exists():  # a concurrent build finished first
            return folder
        (Path(tmp) / "wheels" / ".complete").write_text("ok\n")
        os.replace(Path(tmp) / "wheels", folder)
    return folder


def _context(
    reqs: list[str], pins: list[str], wheels: Path, files: list[Path], root: Path
) -> Iterator[tuple[str, Path | bytes]]:
    yield "Dockerfile", DOCKERFILE.read_bytes()
    yield "requirements.txt", ("\n".join(reqs) + "\n").encode()
    yield "constraints.txt", ("\n".join(pins) + "\n").encode()
    for whl in sorted(wheels.glob("*.whl")):
        yield f"wheels/{whl.name}", whl
    for rel in files:
        yield f"src/{rel.as_posix()}", root / rel


def write_context(out: io.BufferedIOBase, entries: Iterator[tuple[str, Path | bytes]]) -> None:
    """Write a build context (a tar) of ``(name, file or bytes)`` entries to ``out``, with fixed owners and times."""
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.mode, info.mtime, info.uid, info.gid = 0o644, 0, 0, 0
            if isinstance(data, bytes):
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                info.size = data.stat().st_size
                with data.open("rb") as fh:
                    tar.addfile(info, fh)


def image_present(client: docker.DockerClient, tag: str) -> bool:
    """Whether the engine has image ``tag``."""
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def build_worker_image(
    client: docker.DockerClient, base_image: str, say: Say, extras: tuple[str, ...] = DEFAULT_EXTRAS,
    root: Path = REPO_ROOT,
) -> str:
    """Build the worker image from ``base_image`` unless its content-hash tag exists already.

    Args:
        client: the Docker engine.
        base_image: the local base image (``mindforge dev up`` builds it).
        say: progress lines.
        extras: MindForge's extras to install besides the core.
        root: the checkout whose :data:`SOURCES` go in.

    Returns:
        the tag, ``mindforge/worker:<first 16 hex digits of the content hash>``; ``:latest``
        names the same image.

    Raises:
        DevStackError: the base image is missing, the wheels cannot be fetched, or the build fails.
    """
    try:
        base_id = str(client.images.get(base_image).id)
    except docker.errors.ImageNotFound as exc:
        raise DevStackError(f"base image {base_image} is missing; `mindforge dev up` builds it") from exc
    reqs, pins, files = requirements(extras, root), constraints(), source_files(root)
    full = content_hash(base_id, reqs, pins, files, root)
    tag = f"{WORKER_REPOSITORY}:{full[:16]}"
    if image_present(client, tag):
        client.images.get(tag).tag(WORKER_REPOSITORY, "latest")
        return tag
    wheels = fetch_wheels(reqs, pins, say)
    say(f"building {tag} from {base_image} ({len(files)} source files, {len(list(wheels.glob('*.whl')))} wheels) ...")
    with tempfile.TemporaryFile() as ctx:
        write_context(ctx, _context(reqs, pins, wheels, files, root))
        ctx.seek(0)
        try:
            client.images.build(
                fileobj=ctx, custom_context=True, tag=tag, rm=True, forcerm=True, buildargs={"BASE": base_image},
                labels={HASH_LABEL: full}, timeout=1800,
            )
        except (docker.errors.BuildError, docker.errors.APIError) as exc:
            log = "".join(str(chunk.get("stream", "")) for chunk in getattr(exc, "build_log", []) or [])
            raise DevStackError(f"building {tag} failed: {exc}\n{log[-2000:]}") from exc
    client.images.get(tag).tag(WORKER_REPOSITORY, "latest")
    return tag
