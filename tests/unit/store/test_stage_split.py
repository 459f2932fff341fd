"""A trial's stage and its task's split agree where trials are run and stored (a real SQLite store).

``insert_trial`` refuses a lineage trial whose stage is not its task's split;
``run_trials`` refuses the whole batch before any trial runs, as a non-retryable
``ApplicationError`` of type ``StageSplitError`` (no Ray task is submitted: the check
comes first).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from temporalio.exceptions import ApplicationError

from mindforge.domain import TrialStage
from mindforge.evaluation import PoolSplit, StageSplitError
from mindforge.payloads import RunTrialsInput, TrialSpec
from mindforge.settings import REPO_ROOT
from mindforge.store import TaskSource, pool, session_scope, trials
from mindforge.store.engine import init_db
from mindforge.tasks.loader import load_task
from mindforge.tasks.model import Task
from mindforge.trials.record import TrialRecord
from workers.trial_activities import TrialActivities

CONTRACT = "c0" * 32


@pytest.fixture
def placed(engine: Engine, lineage_id: str) -> dict[PoolSplit, Task]:
    """Three bundled tasks, one on each split of the lineage's pool."""
    dirs = sorted(p for p in (REPO_ROOT / "tasks").iterdir() if (p / "task.toml").is_file())[:3]
    out = dict(zip(PoolSplit, (load_task(d) for d in dirs), strict=True))
    with session_scope(engine) as s:
        for split, task in out.items():
            pool.add_task(session=s, task=task, source=TaskSource.BUNDLED)
            pool.add_to_pool(
                session=s, lineage_id=lineage_id, task_hash=task.content_hash, split=split, added_generation=0
            )
    return out


def _record(lineage_id: str, task: Task, stage: TrialStage) -> TrialRecord:
    trial_id = trials.make_trial_id(
        lineage_id=lineage_id, generation_index=0, stage=stage.value, task_hash=task.content_hash,
        contract_hash=CONTRACT, adapter="", attempt=0,
    )
    return TrialRecord(
        trial_id=trial_id, run_id="r", task_id=task.id, task_hash=task.content_hash, agent="model",
        contract_hash=CONTRACT, attempt=0, reward=1.0,
    )


@pytest.mark.parametrize(
    ("stage", "split"),
    [
        (TrialStage.SEARCH, PoolSplit.SEALED),
        (TrialStage.EXPANSION, PoolSplit.SEALED),
        (TrialStage.ROLLOUT, PoolSplit.SEALED),
        (TrialStage.SELECTION, PoolSplit.SEALED),
        (TrialStage.SEALED, PoolSplit.SEARCH),
        (TrialStage.ROLLOUT, PoolSplit.SELECTION),
        (TrialStage.SELECTION, PoolSplit.SEARCH),
    ],
)
def test_insert_refuses_a_trial_on_another_split(engine, lineage_id, placed, stage, split) -> None:
    record = _record(lineage_id, placed[split], stage)
    with pytest.raises(StageSplitError) as caught, session_scope(engine) as s:
        trials.insert_trial(session=s, record=record, lineage_id=lineage_id, generation_index=0, stage=stage.value)
    assert (caught.value.trial_id, caught.value.stage, caught.value.split) == (record.trial_id, stage, split)
    with session_scope(engine) as s:
        assert not trials.trial_exists(session=s, trial_id=record.trial_id)


def test_insert_stores_a_trial_on_its_split(engine, lineage_id, placed) -> None:
    for stage in TrialStage:
        split = {TrialStage.SELECTION: PoolSplit.SELECTION, TrialStage.SEALED: PoolSplit.SEALED}.get(
            stage, PoolSplit.SEARCH
        )
        record = _record(lineage_id, placed[split], stage)
        with session_scope(engine) as s:
            assert trials.insert_trial(session=s, record=record, lineage_id=lineage_id, generation_index=0, stage=stage)


def _batch(lineage_id: str, stage: TrialStage, tasks: list[Task]) -> RunTrialsInput:
    specs = [
        TrialSpec(
            trial_id=_record(lineage_id, t, stage).trial_id, task_path=str(t.path), task_hash=t.content_hash, attempt=0
        )
        for t in tasks
    ]
    return RunTrialsInput(lineage_id=lineage_id, generation=0, stage=stage, contract_hash=CONTRACT, trials=specs)


def test_run_trials_refuses_a_sealed_task_in_a_search_batch(db_url, engine, lineage_id, placed) -> None:
    acts = TrialActivities(init_db(db_url))
    try:
        batch = _batch(lineage_id, TrialStage.SEARCH, [placed[PoolSplit.SEARCH], placed[PoolSplit.SEALED]])
        with pytest.raises(ApplicationError) as caught:
            asyncio.run(acts.run_trials(batch))
        err = caught.value
        assert err.type == "StageSplitError" and err.non_retryable
        sealed_trial = batch.trials[1].trial_id
        assert sealed_trial in str(err) and "'search'" in str(err) and "sealed split" in str(err)
        # a search-split task in a sealed batch, and a task outside the pool, are refused too
        for bad in (
            _batch(lineage_id, TrialStage.SEALED, [placed[PoolSplit.SEARCH]]),
            _batch(lineage_id, TrialStage.SELECTION, [placed[PoolSplit.SEALED]]),
        ):
            with pytest.raises(ApplicationError, match="StageSplitError|runs on"):
                asyncio.run(acts.run_trials(bad))
        with session_scope(engine) as s:
            with pytest.raises(StageSplitError, match="no split"):
                pool.check_trial_splits(
                    session=s, lineage_id=lineage_id, stage=TrialStage.SEARCH, trials=[("t-x", "h-nowhere")]
                )
    finally:
        acts.engine.dispose()


def test_the_pool_fixture_is_what_it_says(engine, lineage_id, placed) -> None:
    with session_scope(engine) as s:
        got = {m.task_hash: m.split for m in pool.list_pool(session=s, lineage_id=lineage_id)}
    assert got == {t.content_hash: split for split, t in placed.items()}
    assert all(Path(t.path).is_dir() for t in placed.values())
