"""Tasks keyed by content hash, and lineage pools whose splits never mix."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import select

from mindforge.settings import REPO_ROOT
from mindforge.store import (
    AlreadyExistsError,
    PoolSplit,
    StoredTask,
    TaskSource,
    session_scope,
)
from mindforge.store import pool as repo
from mindforge.tasks.loader import load_task
from mindforge.tasks.model import Task

BUNDLED = REPO_ROOT / "tasks"


@pytest.fixture
def tasks() -> list[Task]:
    """Two of the bundled tasks, loaded by the real loader."""
    dirs = sorted(p for p in BUNDLED.iterdir() if (p / "task.toml").is_file())[:2]
    if len(dirs) < 2:
        pytest.fail(f"expected at least two bundled tasks under {BUNDLED}")
    return [load_task(d) for d in dirs]


def test_add_task_is_keyed_by_content(engine: Engine, tasks: list[Task]) -> None:
    task = tasks[0]
    provenance = {"generation": 1, "pair": {"adapter": "demo-r0", "contract": "c0"}}
    with session_scope(engine) as session:
        stored = repo.add_task(session=session, task=task, source=TaskSource.DISCOVERED, provenance=provenance)
    with session_scope(engine) as session:
        # the same files again: the first registration wins
        again = repo.add_task(session=session, task=task, source=TaskSource.BUNDLED)
        assert again.id == stored.id == task.content_hash
        assert again.source is TaskSource.DISCOVERED
        assert again.provenance == provenance
        row = repo.get_task(session=session, content_hash=task.content_hash)
        assert (row.task_id, Path(row.path)) == (task.id, task.path)
        assert (row.category, row.difficulty) == (task.config.metadata.category, task.config.metadata.difficulty)
        assert len(session.exec(select(StoredTask)).all()) == 1


def test_pool_membership_and_splits(engine: Engine, lineage_id: str, tasks: list[Task]) -> None:
    search_task, held_task = tasks
    with session_scope(engine) as session:
        for task in tasks:
            repo.add_task(session=session, task=task, source=TaskSource.BUNDLED)
        assert repo.add_to_pool(
            session=session,
            lineage_id=lineage_id,
            task_hash=search_task.content_hash,
            split=PoolSplit.SEARCH,
            added_generation=0,
        )
        assert repo.add_to_pool(
            session=session,
            lineage_id=lineage_id,
            task_hash=held_task.content_hash,
            split=PoolSplit.SEALED,
            added_generation=0,
        )
    with session_scope(engine) as session:
        # a retried activity: same split, no change
        assert not repo.add_to_pool(
            session=session,
            lineage_id=lineage_id,
            task_hash=search_task.content_hash,
            split=PoolSplit.SEARCH,
            added_generation=3,
        )
        members = repo.list_pool(session=session, lineage_id=lineage_id)
        assert {(m.task_hash, m.split, m.added_generation) for m in members} == {
            (search_task.content_hash, PoolSplit.SEARCH, 0),
            (held_task.content_hash, PoolSplit.SEALED, 0),
        }
        held = repo.list_pool_tasks(session=session, lineage_id=lineage_id, split=PoolSplit.SEALED)
        assert [t.task_id for t in held] == [held_task.id]
        assert repo.pool_counts(session=session, lineage_id=lineage_id) == {
            PoolSplit.SEARCH: 1,
            PoolSplit.SELECTION: 0,
            PoolSplit.SEALED: 1,
        }
        assert repo.pool_counts(session=session, lineage_id="other") == {
            PoolSplit.SEARCH: 0,
            PoolSplit.SELECTION: 0,
            PoolSplit.SEALED: 0,
        }


def test_sealed_task_cannot_move_to_search(engine: Engine, lineage_id: str, tasks: list[Task]) -> None:
    task = tasks[0]
    with session_scope(engine) as session:
        repo.add_task(session=session, task=task, source=TaskSource.BUNDLED)
        repo.add_to_pool(
            session=session,
            lineage_id=lineage_id,
            task_hash=task.content_hash,
            split=PoolSplit.SEALED,
            added_generation=0,
        )
    with pytest.raises(AlreadyExistsError, match="sealed"), session_scope(engine) as session:
        repo.add_to_pool(
            session=session,
            lineage_id=lineage_id,
            task_hash=task.content_hash,
            split=PoolSplit.SEARCH,
            added_generation=1,
        )


def test_pool_needs_a_registered_task(engine: Engine, lineage_id: str) -> None:
    with pytest.raises(sa.exc.IntegrityError), session_scope(engine) as session:
        repo.add_to_pool(
            session=session, lineage_id=lineage_id, task_hash="0" * 64, split=PoolSplit.SEARCH, added_generation=0
        )
