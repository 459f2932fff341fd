"""Selection trials are read once per lineage: a pair measured in an earlier generation is not run again.

A real SQLite store; micro tasks as the selection split; trial records written directly
(no sandbox: the planning and the reading are under test).
"""

from __future__ import annotations

from mindforge.evaluation import PairRef, PoolSplit
from mindforge.payloads import EvaluationSpec, RuntimeSpec
from mindforge.store import LineageCreate, init_db, pool, session_scope, trials
from mindforge.store.lineages import create_generation, create_lineage
from mindforge.store.models import TaskSource
from mindforge.store.registry import register_contract
from mindforge.tasks.loader import load_task
from mindforge.trials.record import TrialRecord
from tests.conftest import REPO
from workers.evaluation_activities import drop_read, pair_trial_batches, split_records

PARENT = PairRef(contract_hash="a" * 64, adapter="")
TRAINED = PairRef(contract_hash="a" * 64, adapter="demo-g1-r1")


def _store(tmp_path):
    engine = init_db(f"sqlite:///{tmp_path / 'mf.db'}")
    with session_scope(engine) as s:
        lineage = create_lineage(session=s, lineage_in=LineageCreate(name="reuse", spec={}))
        register_contract(
            session=s, name="baseline", revision="1.0.0", content_hash=PARENT.contract_hash,
            toml_text='[mindforge]\nname = "baseline"\nrevision = "1.0.0"\n',
        )
        for index in (0, 1):
            create_generation(session=s, lineage_id=lineage.id, index=index, contract_hash=PARENT.contract_hash)
        hashes = []
        for name in ("make-directory", "copy-file"):
            task = load_task(REPO / "tasks" / "micro" / name)
            pool.add_task(session=s, task=task, source=TaskSource.BUNDLED)
            pool.add_to_pool(
                session=s, lineage_id=lineage.id, task_hash=task.content_hash, split=PoolSplit.SELECTION,
                added_generation=0,
            )
            hashes.append(task.content_hash)
        return engine, lineage.id, hashes


def _insert(engine, lineage_id, generation, pair, task_hash, attempt, reward):
    trial_id = trials.make_trial_id(
        lineage_id=lineage_id, generation_index=generation, stage="selection", task_hash=task_hash,
        contract_hash=pair.contract_hash, adapter=pair.adapter, attempt=attempt,
    )
    record = TrialRecord(
        trial_id=trial_id, run_id="r", task_id="t", task_hash=task_hash, agent="model",
        contract_hash=pair.contract_hash, adapter=pair.adapter, attempt=attempt, reward=reward,
    )
    with session_scope(engine) as s:
        trials.insert_trial(session=s, record=record, lineage_id=lineage_id, generation_index=generation,
                            stage="selection")
    return trial_id


def test_a_pair_measured_in_an_earlier_generation_is_read_not_run_again(tmp_path):
    engine, lineage_id, hashes = _store(tmp_path)
    first = {_insert(engine, lineage_id, 0, PARENT, h, a, 1.0) for h in hashes for a in (0, 1)}
    evaluation = EvaluationSpec(attempts=2)
    with session_scope(engine) as s:
        records, tasks = split_records(s, lineage_id, 1, PoolSplit.SELECTION)
        batches, n = pair_trial_batches(s, lineage_id, 1, RuntimeSpec(), evaluation, PoolSplit.SELECTION,
                                        [PARENT, TRAINED])
    assert tasks == set(hashes) and n == 2
    assert {r.trial_id for r in records} == first  # generation 1 reads generation 0's parent trials
    todo = drop_read(batches, records)
    assert [(b.adapter, len(b.trials)) for b in todo] == [(TRAINED.adapter, 4)]  # only the new pair runs

    # a trial of the same (pair, task, attempt) stored again in a later generation is not counted twice
    _insert(engine, lineage_id, 1, PARENT, hashes[0], 0, 0.0)
    with session_scope(engine) as s:
        again, _ = split_records(s, lineage_id, 1, PoolSplit.SELECTION)
        earlier, _ = split_records(s, lineage_id, 0, PoolSplit.SELECTION)
    assert {r.trial_id for r in again} == first and len(again) == 4
    assert {r.trial_id for r in earlier} == first  # generation 0 never reads generation 1's trials
    engine.dispose()


def test_the_pair_gate_records_which_generation_ran_the_trials_it_reused(tmp_path):
    import asyncio

    from mindforge.payloads import PlanPromotionInput, UpdateSpec
    from workers.update_activities import UpdateActivities

    engine, lineage_id, hashes = _store(tmp_path)
    kept = {_insert(engine, lineage_id, 0, PARENT, h, a, 0.0) for h in hashes for a in (0, 1)}
    mine = {_insert(engine, lineage_id, 1, TRAINED, h, a, 1.0) for h in hashes for a in (0, 1)}
    gate = PlanPromotionInput(
        lineage_id=lineage_id, generation=1, runtime=RuntimeSpec(), evaluation=EvaluationSpec(attempts=2),
        update=UpdateSpec(), without=PARENT, with_adapter=TRAINED,
    )
    decision = asyncio.run(UpdateActivities(engine, tmp_path).decide_promotion(gate))
    assert set(decision.trial_ids) == kept | mine
    # the kept pair's trials were run by generation 0 and re-read here; the trained pair's are generation 1's own
    assert decision.reused == [{"generation": 0, "contract_hash": PARENT.contract_hash, "adapter": "", "trials": 4}]
    assert not decision.promoted and "only 2 paired selection task(s), fewer than 5" in decision.reason
    engine.dispose()
