"""The worker image's build inputs: pinned requirements, sources, content hash and context (no Docker)."""

from __future__ import annotations

import importlib.metadata
import io
import shutil
import tarfile
from pathlib import Path

import pytest

from mindforge.devstack.base import DevStackError
from mindforge.devstack.worker_image import (
    DOCKERFILE,
    SOURCES,
    constraints,
    content_hash,
    requirements,
    source_files,
    write_context,
)
from mindforge.settings import REPO_ROOT, Settings


def test_requirements_are_the_declared_dependencies_and_the_build_backend() -> None:
    reqs = requirements(("postgres",))
    assert any(r.startswith("ray[default]") for r in reqs)
    assert any(r.startswith("psycopg") for r in reqs)
    assert any(r.startswith("setuptools") for r in reqs)  # pip install -e needs it offline
    assert not any(r.startswith("torch") for r in reqs)  # the train extra only when asked
    assert any(r.startswith("torch") for r in requirements(("postgres", "train")))
    with pytest.raises(DevStackError, match="no extra 'gpu'"):
        requirements(("gpu",))


def test_constraints_pin_this_venvs_versions_ray_included() -> None:
    pins = constraints()
    assert f"ray=={importlib.metadata.version('ray')}" in pins  # a Ray Client must match the nodes' Ray
    assert f"pydantic=={importlib.metadata.version('pydantic')}" in pins  # payloads unpickle alike
    assert not [p for p in pins if p.startswith("mindforge==")]
    assert pins == sorted(pins) and all("==" in p for p in pins)


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for name in SOURCES:
        src, dst = REPO_ROOT / name, root / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst)
    return root


def test_sources_are_code_and_data_without_caches(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    (root / "mindforge" / "__pycache__").mkdir(exist_ok=True)
    (root / "mindforge" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    files = {f.as_posix() for f in source_files(root)}
    assert {"pyproject.toml", "mindforge/settings.py", "workers/ray_trials.py", "deploy/image_map.toml"} <= files
    assert any(f.startswith("tasks/") for f in files) and any(f.startswith("hcp_contracts/") for f in files)
    assert not [f for f in files if "__pycache__" in f or f.endswith(".pyc")]
    assert not [f for f in files if f.startswith(("tests/", ".venv/", ".git/"))]
    shutil.rmtree(root / "workflows")
    with pytest.raises(DevStackError, match="workflows is missing"):
        source_files(root)


def test_the_content_hash_follows_code_packages_and_base(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    reqs, pins, files = requirements(), constraints(), source_files(root)
    first = content_hash("sha256:base", reqs, pins, files, root)
    assert content_hash("sha256:base", reqs, pins, files, root) == first
    assert content_hash("sha256:other", reqs, pins, files, root) != first
    assert content_hash("sha256:base", reqs, [*pins, "zzz==1"], files, root) != first
    (root / "mindforge" / "settings.py").write_text((root / "mindforge" / "settings.py").read_text() + "\n# edit\n")
    assert content_hash("sha256:base", reqs, pins, files, root) != first


def test_the_build_context_is_reproducible(tmp_path: Path) -> None:
    data = tmp_path / "f.txt"
    data.write_text("x")
    blobs = []
    for _ in range(2):
        out = io.BytesIO()
        write_context(out, iter([("Dockerfile", b"FROM x\n"), ("src/f.txt", data)]))
        blobs.append(out.getvalue())
    assert blobs[0] == blobs[1]
    with tarfile.open(fileobj=io.BytesIO(blobs[0])) as tar:
        assert tar.getnames() == ["Dockerfile", "src/f.txt"]
        assert {m.uid for m in tar.getmembers()} == {0}


def test_the_dockerfile_builds_from_the_local_base_image_with_no_registry() -> None:
    text = DOCKERFILE.read_text()
    assert f"ARG BASE={Settings.model_fields['base_image'].default}" in text
    assert "--no-index" in text and "--find-links /tmp/wheels" in text  # offline: no index, no registry
    assert "FROM python" not in text
