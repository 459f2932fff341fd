"""Admitted Discovery tasks into the store: moved to their permanent place, registered in the pool."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import Session

from mindforge.discovery.admission import discovered_dir
from mindforge.discovery.materialise import move_task_dir
from mindforge.discovery.records import AdmittedTask
from mindforge.domain import TaskSource
from mindforge.errors import InputError
from mindforge.evaluation.splits import PoolSplit
from mindforge.store import pool
from mindforge.store.errors import SealedSplitFrozenError
from mindforge.tasks.loader import load_task


def admit_to_store(
    session: Session, lineage_id: str, generation: int, admitted: list[AdmittedTask], *, artifact_root: Path
) -> list[AdmittedTask]:
    """Move admitted tasks to their permanent place and register them in the lineage's pool.

    Idempotent: a retry after a partial run moves nothing twice and registers nothing
    twice. The caller's session scope commits.

    Args:
        session: the unit of work.
        lineage_id: the lineage whose pool grows.
        generation: the generation admitting them (pool ``added_generation``).
        admitted: the admitted tasks (their ``split`` is used as is).
        artifact_root: the artifact root.

    Returns:
        The admitted tasks with their permanent paths and the lineage in the provenance.

    Raises:
        InputError: a task directory is missing or its content changed since it was checked.
        AlreadyExistsError: a task is already in the pool on the other split.
        SealedSplitFrozenError: an admitted task's split is ``sealed`` (the sealed split is
            frozen at lineage start; nothing is moved or registered then).
    """
    for item in admitted:
        if PoolSplit(item.split) == PoolSplit.SEALED:
            raise SealedSplitFrozenError(
                f"admitted task {item.task_id!r} of lineage {lineage_id!r} was assigned the sealed split; "
                "the sealed split is frozen when the lineage starts (admitted tasks go to search or selection)"
            )
    out: list[AdmittedTask] = []
    for item in admitted:
        dest = move_task_dir(Path(item.path), discovered_dir(artifact_root, lineage_id, item.task_id))
        task = load_task(dest)
        if task.content_hash != item.content_hash:
            raise InputError(
                dest, "", f"content hash {task.content_hash[:12]} differs from the checked {item.content_hash[:12]}"
            )
        provenance = {**item.provenance, "lineage_id": lineage_id}
        pool.add_task(session=session, task=task, source=TaskSource.DISCOVERED, provenance=provenance)
        pool.add_to_pool(
            session=session, lineage_id=lineage_id, task_hash=task.content_hash, split=item.split,
            added_generation=generation,
        )
        out.append(item.model_copy(update={"path": str(dest), "provenance": provenance}))
    return out
