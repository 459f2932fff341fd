"""Lineages and generations: creation, uniqueness, updates, stage bookkeeping, UTC timestamps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from mindforge.store import (
    AlreadyExistsError,
    Generation,
    LineageCreate,
    NotFoundError,
    RunStatus,
    session_scope,
)
from mindforge.store import lineages as repo


def test_create_and_read_lineage(engine: Engine) -> None:
    spec = {
        "tasks": "tasks/",
        "contract": "baseline@1.0.0",
        "generations": 3,
        "splits": {"selection_fraction": 0.2, "sealed_fraction": 0.2},
    }
    with session_scope(engine) as session:
        created = repo.create_lineage(session=session, lineage_in=LineageCreate(name="alpha", spec=spec))
    with session_scope(engine) as session:
        stored = repo.get_lineage(session=session, lineage_id=created.id)
        assert stored is not None
        assert stored.name == "alpha"
        assert stored.spec == spec
        assert stored.status is RunStatus.PENDING
        assert stored.current_generation == 0
        assert stored.created_at.tzinfo is UTC
        assert abs(stored.created_at - datetime.now(UTC)) < timedelta(minutes=1)
        assert repo.get_lineage_by_name(session=session, name="alpha").id == created.id
        assert repo.get_lineage_by_name(session=session, name="beta") is None


def test_lineage_name_is_unique(engine: Engine) -> None:
    with session_scope(engine) as session:
        repo.create_lineage(session=session, lineage_in=LineageCreate(name="alpha"))
    with pytest.raises(AlreadyExistsError, match="alpha"), session_scope(engine) as session:
        repo.create_lineage(session=session, lineage_in=LineageCreate(name="alpha"))
    with session_scope(engine) as session:
        assert len(repo.list_lineages(session=session)) == 1


def test_lineage_name_must_not_be_empty() -> None:
    with pytest.raises(ValueError, match="name"):
        LineageCreate(name="")


def test_update_lineage_and_filter_by_status(engine: Engine, lineage_id: str) -> None:
    with session_scope(engine) as session:
        before = repo.get_lineage(session=session, lineage_id=lineage_id).updated_at
        repo.update_lineage(
            session=session, lineage_id=lineage_id, status=RunStatus.RUNNING, current_generation=1, workflow_id="wf-1"
        )
    with session_scope(engine) as session:
        lineage = repo.get_lineage(session=session, lineage_id=lineage_id)
        assert (lineage.status, lineage.current_generation, lineage.workflow_id) == (RunStatus.RUNNING, 1, "wf-1")
        assert lineage.updated_at >= before
        assert [x.id for x in repo.list_lineages(session=session, status=RunStatus.RUNNING)] == [lineage_id]
        assert repo.list_lineages(session=session, status=RunStatus.PAUSED) == []
        with pytest.raises(NotFoundError, match="nope"):
            repo.update_lineage(session=session, lineage_id="nope", status=RunStatus.FAILED)


def test_generation_index_is_unique_per_lineage(engine: Engine, lineage_id: str) -> None:
    with pytest.raises(AlreadyExistsError, match="generation 0"), session_scope(engine) as session:
        repo.create_generation(session=session, lineage_id=lineage_id, index=0)
    with session_scope(engine) as session:
        again = repo.create_generation(session=session, lineage_id=lineage_id, index=0, exist_ok=True)
        assert again.contract_hash == "c0" * 32  # the stored row, unchanged
        repo.create_generation(session=session, lineage_id=lineage_id, index=1)
        assert [g.index for g in repo.list_generations(session=session, lineage_id=lineage_id)] == [0, 1]
    # the database itself refuses a duplicate, whatever the code path
    with pytest.raises(sa.exc.IntegrityError), session_scope(engine) as session:
        session.add(Generation(lineage_id=lineage_id, index=1))
        session.flush()


def test_generation_needs_an_existing_lineage(engine: Engine) -> None:
    with pytest.raises(sa.exc.IntegrityError), session_scope(engine) as session:
        repo.create_generation(session=session, lineage_id="missing", index=0)


def test_update_generation_merges_record(engine: Engine, lineage_id: str) -> None:
    started = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2)))
    with session_scope(engine) as session:
        repo.update_generation(
            session=session,
            lineage_id=lineage_id,
            index=0,
            status=RunStatus.RUNNING,
            record={"counts": {"trials": 8}},
            started_at=started,
        )
    with session_scope(engine) as session:
        repo.update_generation(session=session, lineage_id=lineage_id, index=0, record={"stop_reason": "budget"})
    with session_scope(engine) as session:
        generation = repo.get_generation(session=session, lineage_id=lineage_id, index=0)
        assert generation.status is RunStatus.RUNNING
        assert generation.record == {"counts": {"trials": 8}, "stop_reason": "budget"}
        # stored as UTC and read back aware: the same instant, in UTC
        assert generation.started_at == started
        assert generation.started_at.tzinfo is UTC
        assert generation.started_at.hour == 1


def test_naive_timestamps_are_refused(engine: Engine, lineage_id: str) -> None:
    with pytest.raises(sa.exc.StatementError, match="naive datetime"), session_scope(engine) as session:
        repo.update_generation(session=session, lineage_id=lineage_id, index=0, finished_at=datetime(2026, 1, 1))


def test_mark_stage_run_is_idempotent(engine: Engine, lineage_id: str) -> None:
    with session_scope(engine) as session:
        assert repo.mark_stage_run(session=session, lineage_id=lineage_id, generation_index=0, stage="discovery")
        assert repo.mark_stage_run(session=session, lineage_id=lineage_id, generation_index=0, stage="expansion")
    with session_scope(engine) as session:
        assert not repo.mark_stage_run(session=session, lineage_id=lineage_id, generation_index=0, stage="discovery")
        with pytest.raises(NotFoundError):
            repo.mark_stage_run(session=session, lineage_id=lineage_id, generation_index=5, stage="update")
    with session_scope(engine) as session:
        generation = repo.get_generation(session=session, lineage_id=lineage_id, index=0)
        lineage = repo.get_lineage(session=session, lineage_id=lineage_id)
        assert generation.stages_run == ["discovery", "expansion"]
        assert lineage.stages_run == {"0": ["discovery", "expansion"]}


def test_failed_scope_rolls_back(engine: Engine) -> None:
    with pytest.raises(RuntimeError), session_scope(engine) as session:
        repo.create_lineage(session=session, lineage_in=LineageCreate(name="doomed"))
        raise RuntimeError("boom")
    with session_scope(engine) as session:
        assert repo.get_lineage_by_name(session=session, name="doomed") is None
