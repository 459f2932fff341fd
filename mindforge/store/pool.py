"""Repository functions for tasks (content-addressed) and lineage task pools.

A task row is keyed by the task's content hash, so the same files registered twice are
one task. A lineage's pool puts each task on one split for good (search, selection or
sealed; :mod:`mindforge.evaluation.splits`): a selection or sealed task never moves to
the search split, which would leak it into search and training. Functions
only flush; the caller's session scope commits.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from sqlmodel import Session, col, func, select

from mindforge.domain import TrialStage
from mindforge.evaluation.splits import PoolSplit
from mindforge.evaluation.stages import check_stage_split
from mindforge.store._insert import insert_ignore
from mindforge.store.errors import AlreadyExistsError, StoreError
from mindforge.store.models import PoolMembership, StoredTask, TaskSource
from mindforge.tasks.model import Task


def add_task(
    *, session: Session, task: Task, source: TaskSource, provenance: dict[str, Any] | None = None
) -> StoredTask:
    """Register a loaded task, or return the stored row with the same content hash.

    Args:
        session: the unit of work.
        task: a loaded, checked task.
        source: bundled, imported or discovered.
        provenance: for discovered tasks, where it came from (generation, proposing
            pair, validation evidence); JSON-serializable.

    Returns:
        The stored task; the first registration's path, source and provenance win.
    """
    row = StoredTask(
        id=task.content_hash,
        task_id=task.id,
        path=str(task.path),
        category=task.config.metadata.category,
        difficulty=task.config.metadata.difficulty,
        source=source,
        provenance=provenance or {},
    )
    insert_ignore(session, row)
    stored = session.get(StoredTask, task.content_hash)
    if stored is None:  # inserted or present a moment ago; only a concurrent delete gets here
        raise StoreError(f"task {task.content_hash} vanished while being registered")
    return stored


def get_task(*, session: Session, content_hash: str) -> StoredTask | None:
    """The task with this content hash, or None."""
    return session.get(StoredTask, content_hash)


def add_to_pool(*, session: Session, lineage_id: str, task_hash: str, split: PoolSplit, added_generation: int) -> bool:
    """Put a registered task in a lineage's pool.

    Args:
        session: the unit of work.
        lineage_id: the lineage.
        task_hash: a registered task's content hash.
        split: ``search``, ``selection`` or ``sealed``.
        added_generation: the generation that added it.

    Returns:
        True when added, False when it was already in the pool on the same split.

    Raises:
        AlreadyExistsError: the task is already in the pool on the other split.
        sqlalchemy.exc.IntegrityError: unknown lineage or task.
    """
    row = PoolMembership(lineage_id=lineage_id, task_hash=task_hash, split=split, added_generation=added_generation)
    if insert_ignore(session, row):
        return True
    stored = session.get(PoolMembership, (lineage_id, task_hash))
    if stored is not None and stored.split != split:
        raise AlreadyExistsError(
            f"task {task_hash} is in lineage {lineage_id!r}'s pool on split {stored.split.value!r}; "
            f"it cannot move to {PoolSplit(split).value!r}"
        )
    return False


def split_of(*, session: Session, lineage_id: str, task_hash: str) -> PoolSplit | None:
    """The split a task is on in a lineage's pool, or None when it is not in the pool."""
    stored = session.get(PoolMembership, (lineage_id, task_hash))
    return PoolSplit(stored.split) if stored is not None else None


def check_trial_splits(
    *, session: Session, lineage_id: str, stage: TrialStage, trials: Iterable[tuple[str, str]]
) -> None:
    """Check that every trial of a batch may run in ``stage`` on its task's split.

    Args:
        session: the unit of work (read only).
        lineage_id: the lineage whose pool holds the tasks.
        stage: the batch's stage.
        trials: ``(trial_id, task_hash)`` pairs.

    Raises:
        mindforge.evaluation.StageSplitError: the first trial whose task is on another
            split than the stage allows (:func:`mindforge.evaluation.split_of_stage`), or
            on no split of the pool.
    """
    splits: dict[str, PoolSplit | None] = {}
    for trial_id, task_hash in trials:
        if task_hash not in splits:
            splits[task_hash] = split_of(session=session, lineage_id=lineage_id, task_hash=task_hash)
        check_stage_split(trial_id=trial_id, stage=stage, split=splits[task_hash], task_hash=task_hash)


def list_pool(*, session: Session, lineage_id: str, split: PoolSplit | None = None) -> list[PoolMembership]:
    """A lineage's pool memberships, in the order they were added, optionally of one split."""
    statement = (
        select(PoolMembership)
        .where(PoolMembership.lineage_id == lineage_id)
        .order_by(col(PoolMembership.added_generation), col(PoolMembership.created_at), col(PoolMembership.task_hash))
    )
    if split is not None:
        statement = statement.where(PoolMembership.split == split)
    return list(session.exec(statement).all())


def list_pool_tasks(*, session: Session, lineage_id: str, split: PoolSplit | None = None) -> list[StoredTask]:
    """The tasks of a lineage's pool, in the order they were added, optionally of one split."""
    statement = (
        select(StoredTask)
        .join(PoolMembership, col(PoolMembership.task_hash) == col(StoredTask.id))
        .where(PoolMembership.lineage_id == lineage_id)
        .order_by(col(PoolMembership.added_generation), col(PoolMembership.created_at), col(StoredTask.id))
    )
    if split is not None:
        statement = statement.where(PoolMembership.split == split)
    return list(session.exec(statement).all())


def pool_counts(*, session: Session, lineage_id: str) -> dict[PoolSplit, int]:
    """Number of tasks per split in a lineage's pool (both splits present, possibly 0)."""
    statement = (
        select(PoolMembership.split, func.count())
        .where(PoolMembership.lineage_id == lineage_id)
        .group_by(col(PoolMembership.split))
    )
    counts = {split: 0 for split in PoolSplit}
    for split, count in session.exec(statement).all():
        counts[PoolSplit(split)] = count
    return counts


def category_split_counts(
    *, session: Session, lineage_id: str, exclude: set[str] | None = None
) -> dict[str, dict[PoolSplit, int]]:
    """Tasks per (category, split) in a lineage's pool: what new tasks are assigned against.

    Args:
        session: the unit of work.
        lineage_id: the lineage.
        exclude: task hashes not to count (e.g. a retried admission's own tasks).

    Returns:
        category -> split -> tasks.
    """
    statement = (
        select(StoredTask.category, PoolMembership.split, PoolMembership.task_hash)
        .join(PoolMembership, col(PoolMembership.task_hash) == col(StoredTask.id))
        .where(PoolMembership.lineage_id == lineage_id)
    )
    out: dict[str, dict[PoolSplit, int]] = defaultdict(lambda: defaultdict(int))
    for category, split, task_hash in session.exec(statement).all():
        if exclude and task_hash in exclude:
            continue
        out[category][PoolSplit(split)] += 1
    return {c: dict(v) for c, v in out.items()}
