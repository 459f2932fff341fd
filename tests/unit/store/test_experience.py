"""The experience repository on a real, migrated database: entries, snapshots, rejections, and the split guard."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from mindforge.evaluation.splits import PoolSplit
from mindforge.experience import (
    EntryValidation,
    ExperienceSnapshot,
    Provenance,
    RejectionReason,
    SplitRefused,
    make_entry,
    mine_solution,
)
from mindforge.experience.validation import reject
from mindforge.hcp import ExampleStep
from mindforge.store import TaskSource, session_scope
from mindforge.store import experience as repo
from mindforge.store.pool import add_task, add_to_pool
from mindforge.tasks.loader import load_task
from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "tasks"
PASSED = EntryValidation(rewards=[1.0, 1.0])


def _entry(task, command: str = "echo 144 > /app/answer.txt"):
    made = make_entry(instruction=task.instruction, steps=[ExampleStep(command=command)],
                      provenance=Provenance.ORACLE, trial_id="oracle", task_id=task.id, task_hash=task.content_hash)
    return made.with_validation(PASSED)


def test_entries_snapshots_and_rejections_round_trip(engine: Engine, lineage_id: str) -> None:
    task = load_task(FIXTURES / "exp_answer")
    with session_scope(engine) as session:
        add_task(session=session, task=task, source=TaskSource.BUNDLED)
        add_to_pool(session=session, lineage_id=lineage_id, task_hash=task.content_hash, split=PoolSplit.SEARCH,
                    added_generation=0)
        entry = _entry(task)
        assert repo.add_entries(session=session, lineage_id=lineage_id, entries=[entry]) == 1
        assert repo.add_entries(session=session, lineage_id=lineage_id, entries=[entry]) == 0  # idempotent
        assert repo.list_entries(session=session, lineage_id=lineage_id) == [entry]
        snapshot = ExperienceSnapshot(entries=(entry,))
        row = repo.publish_snapshot(session=session, lineage_id=lineage_id, generation_index=0, snapshot=snapshot)
        assert row.oracle_entries == 1 and row.model_entries == 0
        latest = repo.latest_snapshot(session=session, lineage_id=lineage_id)
        assert latest is not None and latest.snapshot_id == snapshot.snapshot_id
        failed = reject(_entry(task, "echo 89 > /app/answer.txt"), RejectionReason.FAILED, "replay rewards 0, 0")
        assert repo.record_rejections(session=session, lineage_id=lineage_id, generation_index=0,
                                      rejections=[failed, failed]) == 1
        counts = repo.rejection_counts(session=session, lineage_id=lineage_id)
        assert counts == {"failed": 1, "flaky": 0, "duplicate": 0, "too_long": 0}


@pytest.mark.parametrize("split", [PoolSplit.SELECTION, PoolSplit.SEALED, None])
def test_the_store_refuses_an_entry_from_another_split(engine: Engine, lineage_id: str, split) -> None:
    """A selection or sealed task (or one outside the pool) never enters the library, by the store's own check."""
    task = load_task(FIXTURES / "exp_answer")
    with session_scope(engine) as session:
        add_task(session=session, task=task, source=TaskSource.BUNDLED)
        if split is not None:
            add_to_pool(session=session, lineage_id=lineage_id, task_hash=task.content_hash, split=split,
                        added_generation=0)
        name = f"'{split}'" if split is not None else "'none'"
        with pytest.raises(SplitRefused, match=rf"task exp_answer.*{name} split of lineage 'demo'"):
            repo.add_entries(session=session, lineage_id=lineage_id, entries=[_entry(task)])
        assert repo.list_entries(session=session, lineage_id=lineage_id) == []
    # mining refuses the same task before any store is involved
    with pytest.raises(SplitRefused):
        mine_solution(task_id=task.id, task_hash=task.content_hash, instruction=task.instruction,
                      solve_sh=task.solution_dir / "solve.sh", split=str(split) if split else None, lineage="demo")


def test_judged_oracle_tasks_and_library_counts(engine: Engine, lineage_id: str) -> None:
    """A task counts as judged once its reference solution was kept or rejected; model entries do not judge it."""
    task = load_task(FIXTURES / "exp_answer")
    with session_scope(engine) as session:
        add_task(session=session, task=task, source=TaskSource.BUNDLED)
        add_to_pool(session=session, lineage_id=lineage_id, task_hash=task.content_hash, split=PoolSplit.SEARCH,
                    added_generation=0)
        assert repo.judged_oracle_tasks(session=session, lineage_id=lineage_id) == set()
        assert repo.library_counts(session=session, lineage_id=lineage_id) == {"oracle": 0, "model": 0}
        model = make_entry(instruction=task.instruction, steps=[ExampleStep(command="printf 144 > /app/answer.txt")],
                           provenance=Provenance.MODEL, trial_id="t-1", task_id=task.id, task_hash=task.content_hash)
        repo.add_entries(session=session, lineage_id=lineage_id, entries=[model.with_validation(PASSED)])
        assert repo.judged_oracle_tasks(session=session, lineage_id=lineage_id) == set()
        assert repo.library_counts(session=session, lineage_id=lineage_id) == {"oracle": 0, "model": 1}
        failed = reject(_entry(task), RejectionReason.FLAKY, "replay rewards 1, 0")
        repo.record_rejections(session=session, lineage_id=lineage_id, generation_index=0, rejections=[failed])
        assert repo.judged_oracle_tasks(session=session, lineage_id=lineage_id) == {task.content_hash}
        repo.add_entries(session=session, lineage_id=lineage_id, entries=[_entry(task)])
        assert repo.judged_oracle_tasks(session=session, lineage_id=lineage_id) == {task.content_hash}
        assert repo.library_counts(session=session, lineage_id=lineage_id) == {"oracle": 1, "model": 1}
        assert repo.judged_oracle_tasks(session=session, lineage_id="other") == set()
