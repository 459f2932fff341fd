"""A pair's sealed trials run once per lineage: a pair kept across generations is re-read, never run again.

A real SQLite store; micro tasks as the sealed split; trial records written directly (no
sandbox: the planning, the reading and the marks are under test). Decisions record which
generation's trials they reused.
"""

from __future__ import annotations

import asyncio

from mindforge.evaluation import PairRef, PoolSplit
from mindforge.payloads import EvaluationSpec, SealedEvaluationInput
from mindforge.reports.compounding import compounding_rows, kept_text
from mindforge.store import LineageCreate, init_db, lineages, pool, session_scope, trials
from mindforge.store.lineages import create_generation, create_lineage
from mindforge.store.models import TaskSource
from mindforge.store.registry import register_contract
from mindforge.tasks.loader import load_task
from mindforge.trials.record import FailureClass, TrialRecord
from tests.conftest import REPO
from workers.evaluation_activities import EvaluationActivities, reused_trials

ROOT = PairRef(contract_hash="a" * 64)
TRAINED = PairRef(contract_hash="b" * 64, adapter="reuse-g0-r0")
OTHER = PairRef(contract_hash="c" * 64)
TASKS = ("make-directory", "copy-file", "count-lines")


def _store(tmp_path):
    engine = init_db(f"sqlite:///{tmp_path / 'mf.db'}")
    with session_scope(engine) as s:
        lineage = create_lineage(session=s, lineage_in=LineageCreate(name="sealed-reuse", spec={}))
        for pair, revision in ((ROOT, "1.0.0"), (TRAINED, "1.1.0"), (OTHER, "1.2.0")):
            register_contract(
                session=s, name="baseline", revision=revision, content_hash=pair.contract_hash,
                toml_text=f'[mindforge]\nname = "baseline"\nrevision = "{revision}"\n',
            )
        for index in (0, 1, 2):
            create_generation(session=s, lineage_id=lineage.id, index=index, contract_hash=ROOT.contract_hash)
        hashes = []
        for name in TASKS:
            task = load_task(REPO / "tasks" / "micro" / name)
            pool.add_task(session=s, task=task, source=TaskSource.BUNDLED)
            pool.add_to_pool(
                session=s, lineage_id=lineage.id, task_hash=task.content_hash, split=PoolSplit.SEALED,
                added_generation=0,
            )
            hashes.append(task.content_hash)
        return engine, lineage.id, hashes


def _run(engine, inp: SealedEvaluationInput, reward) -> int:
    """Plan the generation's sealed trials and store each planned one as run; returns how many ran."""
    plan = asyncio.run(EvaluationActivities(engine).plan_sealed_trials(inp))
    ran = 0
    with session_scope(engine) as s:
        for batch in plan.batches:
            for t in batch.trials:
                value = reward(batch.contract_hash, t.task_hash)
                record = TrialRecord(
                    trial_id=t.trial_id, run_id="r", task_id="t", task_hash=t.task_hash, agent="model",
                    contract_hash=batch.contract_hash, adapter=batch.adapter, attempt=t.attempt, reward=value,
                    failure_class=None if value == 1.0 else FailureClass.TASK_FAILED,
                )
                ran += trials.insert_trial(
                    session=s, record=record, lineage_id=inp.lineage_id, generation_index=inp.generation,
                    stage="sealed",
                )
    EvaluationActivities(engine)._measure(inp)
    return ran


def test_a_pair_kept_across_generations_is_re_read_not_run_again(tmp_path):
    engine, lineage_id, hashes = _store(tmp_path)
    evaluation = EvaluationSpec(attempts=2, lift_resamples=200)

    def reward(contract, task_hash):  # the trained pair passes two of three tasks, the others nothing
        return 1.0 if contract == TRAINED.contract_hash and task_hash != hashes[0] else 0.0

    gen0 = SealedEvaluationInput(lineage_id=lineage_id, generation=0, evaluation=evaluation, parent=ROOT,
                                 successor=TRAINED)
    assert _run(engine, gen0, reward) == 2 * len(TASKS) * 2  # both pairs, every task, two attempts
    # generation 1 keeps the pair it was handed (pair 1 = pair 2): nothing runs on the sealed split again
    gen1 = SealedEvaluationInput(lineage_id=lineage_id, generation=1, evaluation=evaluation, parent=TRAINED,
                                 successor=TRAINED, root=ROOT)
    assert _run(engine, gen1, reward) == 0
    # generation 2 tries another pair: only that pair runs
    gen2 = SealedEvaluationInput(lineage_id=lineage_id, generation=2, evaluation=evaluation, parent=TRAINED,
                                 successor=OTHER, root=ROOT)
    assert _run(engine, gen2, reward) == len(TASKS) * 2
    with session_scope(engine) as s:
        gens = lineages.list_generations(session=s, lineage_id=lineage_id)
        ran = {r.trial_id: r.generation_index for r in trials.list_trials(session=s, lineage_id=lineage_id)}
        kept_ids = [t for t, g in ran.items() if g == 0]
        reused = reused_trials(s, lineage_id, 2, PoolSplit.SEALED, kept_ids)
        records = [g.record for g in gens]
        rows = compounding_rows(gens, reading="tasks")
    # each figure says which generation ran its trials: the kept pair's are generation 0's, re-read by 1 and 2
    first, second, third = (r["readings"]["tasks"] for r in records)
    assert first["successor"]["run_in"] == second["parent"]["run_in"] == second["successor"]["run_in"] == [0]
    assert third["parent"]["run_in"] == [0] and third["successor"]["run_in"] == [2]
    assert second["parent"]["score"] == first["successor"]["score"]  # the same trials, the same figure
    # the table marks the kept pair as a re-read of pair 1, with no figure of its own
    assert [r.kept for r in rows] == [False, False, True, False]
    assert kept_text(rows[2]) == "= pair 1 (kept; re-read, not run again)"
    assert reused == [
        {"generation": 0, "contract_hash": ROOT.contract_hash, "adapter": "", "trials": 6},
        {"generation": 0, "contract_hash": TRAINED.contract_hash, "adapter": TRAINED.adapter, "trials": 6},
    ]
    engine.dispose()
