"""The sealed-instances reading's tasks get their own attempts; the other sealed readings keep theirs.

A real SQLite store; micro tasks as the sealed split, two of them labelled instances of two
families in the lineage's readings; the planning and the measurement are under test (trial
records written directly, no sandbox).
"""

from __future__ import annotations

import asyncio
from collections import Counter

from mindforge.evaluation import PairRef, PoolSplit
from mindforge.evaluation.curriculum import ReadingsRecord, SealedReading
from mindforge.payloads import EvaluationSpec, SealedEvaluationInput
from mindforge.store import LineageCreate, init_db, lineages, pool, session_scope, trials
from mindforge.store.lineages import create_generation, create_lineage
from mindforge.store.models import TaskSource
from mindforge.store.registry import register_contract
from mindforge.tasks.loader import load_task
from mindforge.trials.record import FailureClass, TrialRecord
from tests.conftest import REPO
from workers.evaluation_activities import EvaluationActivities

ROOT, CHILD = PairRef(contract_hash="a" * 64), PairRef(contract_hash="b" * 64)
TASKS = ("make-directory", "copy-file", "count-lines")


def _store(tmp_path):
    engine = init_db(f"sqlite:///{tmp_path / 'mf.db'}")
    hashes = [load_task(REPO / "tasks" / "micro" / name).content_hash for name in TASKS]
    readings = ReadingsRecord(
        training_families=["fam-a", "fam-b"],
        readings={SealedReading.INSTANCES: sorted(hashes[:2]), SealedReading.TASKS: [hashes[2]]},
        family_of={hashes[0]: "fam-a", hashes[1]: "fam-b"},
    )
    with session_scope(engine) as s:
        spec = {"readings": readings.model_dump(mode="json")}
        lineage = create_lineage(session=s, lineage_in=LineageCreate(name="instance-attempts", spec=spec))
        for pair, revision in ((ROOT, "1.0.0"), (CHILD, "1.1.0")):
            register_contract(
                session=s, name="baseline", revision=revision, content_hash=pair.contract_hash,
                toml_text=f'[mindforge]\nname = "baseline"\nrevision = "{revision}"\n',
            )
        create_generation(session=s, lineage_id=lineage.id, index=0, contract_hash=ROOT.contract_hash)
        for name in TASKS:
            task = load_task(REPO / "tasks" / "micro" / name)
            pool.add_task(session=s, task=task, source=TaskSource.BUNDLED)
            pool.add_to_pool(
                session=s, lineage_id=lineage.id, task_hash=task.content_hash, split=PoolSplit.SEALED,
                added_generation=0,
            )
        return engine, lineage.id, hashes


def test_instance_tasks_run_their_own_attempts_and_the_reading_counts_them(tmp_path) -> None:
    engine, lineage_id, hashes = _store(tmp_path)
    inp = SealedEvaluationInput(
        lineage_id=lineage_id, generation=0, parent=ROOT, successor=CHILD,
        evaluation=EvaluationSpec(attempts=2, sealed_attempts=1, sealed_instance_attempts=3, lift_resamples=200),
    )
    plan = asyncio.run(EvaluationActivities(engine).plan_sealed_trials(inp))
    planned = Counter((b.contract_hash, t.task_hash) for b in plan.batches for t in b.trials)
    for pair in (ROOT, CHILD):  # every pair the same trials: 3 on each instance, 1 on the pinned task
        assert [planned[(pair.contract_hash, h)] for h in hashes] == [3, 3, 1]
    with session_scope(engine) as s:
        for batch in plan.batches:
            for t in batch.trials:
                value = 1.0 if batch.contract_hash == CHILD.contract_hash and t.task_hash == hashes[0] else 0.0
                record = TrialRecord(
                    trial_id=t.trial_id, run_id="r", task_id="t", task_hash=t.task_hash, agent="model",
                    contract_hash=batch.contract_hash, adapter=batch.adapter, attempt=t.attempt, reward=value,
                    failure_class=None if value == 1.0 else FailureClass.TASK_FAILED,
                )
                trials.insert_trial(session=s, record=record, lineage_id=lineage_id, generation_index=0, stage="sealed")
    EvaluationActivities(engine)._measure(inp)
    with session_scope(engine) as s:
        [gen] = lineages.list_generations(session=s, lineage_id=lineage_id)
    lift = gen.record["sealed_lifts"]["instances"]
    assert (lift["n_tasks"], lift["n_trials"]) == (2, 12) and lift["mean"] == 0.5  # 3 trials a task, both pairs
    # planning again finds every trial stored: nothing runs twice
    assert asyncio.run(EvaluationActivities(engine).plan_sealed_trials(inp)).batches == []
