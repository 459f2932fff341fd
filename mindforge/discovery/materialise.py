"""Write a proposal as a native task directory (Harbor / Terminal-Bench 2 layout).

The directory gets a ``task.toml`` with fixed, modest limits (a proposal does not choose
its own limits), the proposal's files, and executable ``tests/test.sh`` and
``solution/solve.sh``. Directories move from the staging area to their permanent place
with :func:`move_task_dir`.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

from mindforge.discovery.schema import TaskProposal
from mindforge.errors import InputError
from mindforge.tasks.hashing import content_hash

_EXECUTABLE = ("tests/test.sh", "solution/solve.sh")
#: a task directory name: the proposed id, possibly with a generation prefix and a suffix
_DIR_NAME_RE = re.compile(r"[a-z0-9][a-z0-9-]{1,62}[a-z0-9]")


class DiscoveredTaskLimits(BaseModel):
    """Limits written into every discovered task's ``task.toml``.

    Attributes:
        agent_timeout_sec: the agent phase's wall-clock limit, seconds.
        verifier_timeout_sec: the verifier's limit, seconds.
        build_timeout_sec: the image build's limit, seconds (apt/pip steps included).
        cpus / memory_mb / storage_mb: container resources (MB = 2**20 bytes).
    """

    model_config = ConfigDict(frozen=True)

    agent_timeout_sec: PositiveFloat = 600.0
    verifier_timeout_sec: PositiveFloat = 120.0
    build_timeout_sec: PositiveFloat = 300.0
    cpus: PositiveFloat = 1
    memory_mb: PositiveInt = 1024
    storage_mb: PositiveInt = 2048
    tags: tuple[str, ...] = Field(default=("discovered",))


def task_toml(proposal: TaskProposal, limits: DiscoveredTaskLimits, metadata: dict[str, Any] | None = None) -> str:
    """The ``task.toml`` text of a proposal: its category and difficulty, fixed limits, no network.

    ``metadata`` adds keys to ``[metadata]`` (a family instance: ``family`` and ``family_params``).
    """
    doc: dict[str, Any] = {
        "version": "1.0",
        "metadata": {
            "difficulty": proposal.difficulty,
            "category": proposal.category,
            "tags": list(limits.tags),
            "proposed_id": proposal.task_id,
            **(metadata or {}),
        },
        "verifier": {"timeout_sec": float(limits.verifier_timeout_sec)},
        "agent": {"timeout_sec": float(limits.agent_timeout_sec)},
        "environment": {
            "build_timeout_sec": float(limits.build_timeout_sec),
            "cpus": limits.cpus,
            "memory_mb": limits.memory_mb,
            "storage_mb": limits.storage_mb,
            "network_mode": "no-network",
        },
    }
    return tomli_w.dumps(doc)


def materialise(
    proposal: TaskProposal,
    staging_dir: Path,
    *,
    task_id: str | None = None,
    limits: DiscoveredTaskLimits | None = None,
    metadata: dict[str, Any] | None = None,
) -> Path:
    """Write ``proposal`` as the task directory ``staging_dir/<task_id>``.

    Args:
        proposal: a checked proposal.
        staging_dir: the staging area (created when missing).
        task_id: the directory name, i.e. the task id (default the proposed id);
            callers pass the generation-prefixed id.
        limits: limits for ``task.toml`` (default :class:`DiscoveredTaskLimits`).
        metadata: extra ``[metadata]`` keys (see :func:`task_toml`).

    Returns:
        The task directory.

    Raises:
        InputError: ``task_id`` is not a valid id, or the directory already exists.
    """
    name = task_id or proposal.task_id
    if not _DIR_NAME_RE.fullmatch(name):
        raise InputError(staging_dir / name, "", f"{name!r} is not a task id (lowercase letters, digits, '-')")
    root = Path(staging_dir) / name
    if root.exists():
        raise InputError(root, "", "task directory already exists in the staging area")
    root.mkdir(parents=True)
    (root / "task.toml").write_text(task_toml(proposal, limits or DiscoveredTaskLimits(), metadata), encoding="utf-8")
    for rel, text in proposal.all_files().items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="")
        path.chmod(0o755 if rel in _EXECUTABLE else 0o644)
    return root


def move_task_dir(src: Path, dest: Path) -> Path:
    """Move a task directory to its permanent place; idempotent for retries.

    When ``dest`` already holds the same files (same content hash) the move counts as
    done and ``src`` (if still there) is removed.

    Args:
        src: the staged task directory.
        dest: the permanent directory (its parent is created).

    Returns:
        ``dest``.

    Raises:
        InputError: ``dest`` exists with other content, or neither ``src`` nor ``dest`` exists.
    """
    src, dest = Path(src), Path(dest)
    if dest.exists():
        if src.exists() and content_hash(src) != content_hash(dest):
            raise InputError(dest, "", f"already exists with other content than {src}")
        if src.exists() and src.resolve() != dest.resolve():
            shutil.rmtree(src)
        return dest
    if not src.is_dir():
        raise InputError(src, "", "staged task directory is missing")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.moving")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp, symlinks=True)
    tmp.rename(dest)
    shutil.rmtree(src)
    return dest
