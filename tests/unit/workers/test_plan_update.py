"""The Update's training contract on a real SQLite store: the best contract by search-split evidence,
whatever Expansion's successor check decided, and ``no_signal`` only when no contract passed a search trial."""

from __future__ import annotations

import asyncio

from temporalio.testing import ActivityEnvironment

from mindforge.evaluation import PoolSplit
from mindforge.hcp import derive, load_contract
from mindforge.payloads import UpdateInput, UpdateSpec
from mindforge.store import engine as se
from mindforge.store import init_db, lineages, pool, registry, trials
from mindforge.store.models import Lineage, LineageCreate, TaskSource
from mindforge.tasks.loader import load_task
from mindforge.trials.record import FailureClass, TrialRecord
from tests.conftest import BUNDLED_TASKS, REPO
from workers.iteration_activities import IterationActivities

TASKS = ["count-lines", "count-words", "make-directory"]


def _store(tmp_path):
    engine = init_db(f"sqlite:///{tmp_path / 'mindforge.db'}")
    base = load_contract(REPO / "hcp_contracts" / "baseline.toml")
    cand = derive(base, revision="1.0.0-cand", edit="hooks.plan_first -> true", changes={"hooks.plan_first": True})
    loaded = [load_task(BUNDLED_TASKS / "micro" / t) for t in TASKS]
    with se.session_scope(engine) as s:
        for c in (base, cand):
            registry.register_hcp_contract(session=s, contract=c)
        lin = lineages.create_lineage(session=s, lineage_in=LineageCreate(name="upd", spec={}))
        lineages.create_generation(session=s, lineage_id=lin.id, index=0, contract_hash=base.content_hash)
        for t in loaded:
            pool.add_task(session=s, task=t, source=TaskSource.BUNDLED)
            pool.add_to_pool(session=s, lineage_id=lin.id, task_hash=t.content_hash, split=PoolSplit.SEARCH,
                             added_generation=0)
        lineage_id = lin.id
    return engine, lineage_id, base, cand, loaded


def _trials(engine, lineage_id, contract, tasks, rewards, stage):
    with se.session_scope(engine) as s:
        for i, (t, reward) in enumerate(zip(tasks, rewards, strict=True)):
            rec = TrialRecord(
                trial_id=f"{stage}-{contract.content_hash[:6]}-{i}", run_id="r", task_id=t.id, task_hash=t.content_hash,
                agent="model", contract_hash=contract.content_hash, reward=reward,
                failure_class=None if reward == 1.0 else FailureClass.TASK_FAILED,
            )
            trials.insert_trial(session=s, record=rec, lineage_id=lineage_id, generation_index=0, stage=stage)


def _plan(engine, lineage_id, parent, successor):
    from mindforge.policy.doubles.tiny import ensure_tiny_model

    inp = UpdateInput(
        lineage_id=lineage_id, generation=0, contract_hash=parent.content_hash,
        update=UpdateSpec(base_model_path=str(ensure_tiny_model()), iterations=2),
        successor_contract_hash=successor.content_hash,
    )
    return asyncio.run(ActivityEnvironment().run(IterationActivities(engine).plan_update, inp))


def test_the_update_trains_under_the_best_search_contract_when_the_successor_check_kept_the_parent(tmp_path):
    engine, lineage_id, base, cand, tasks = _store(tmp_path)
    try:
        _trials(engine, lineage_id, base, tasks, [0.0, 0.0, 0.0], "expansion")  # the parent passes nothing
        _trials(engine, lineage_id, cand, tasks[:2], [1.0, 0.0], "search")  # a search candidate passes one
        plan = _plan(engine, lineage_id, base, base)  # the successor check kept the parent
        assert plan.contract_hash == cand.content_hash
        assert (plan.on_contract_trials, plan.on_contract_passes) == (2, 1) and "search candidate" in plan.note
        with se.session_scope(engine) as s:
            record = lineages.get_generation(session=s, lineage_id=lineage_id, index=0).record["update"]["plan"]
            assert record["contract"] == cand.content_hash and record["search_evidence"][0]["passes"] == 1
            assert s.get(Lineage, lineage_id) is not None
    finally:
        engine.dispose()


def test_nothing_trains_only_when_no_contract_passed_a_search_trial(tmp_path):
    engine, lineage_id, base, cand, tasks = _store(tmp_path)
    try:
        _trials(engine, lineage_id, base, tasks, [0.0, 0.0, 0.0], "expansion")
        _trials(engine, lineage_id, cand, tasks[:2], [0.0, 0.0], "search")
        plan = _plan(engine, lineage_id, base, cand)
        assert plan.contract_hash == "" and "no contract passed" in plan.note
    finally:
        engine.dispose()
