"""A real SQLite store holding a curriculum lineage whose sealed split is read three ways: shared by report tests.

:func:`fill_readings` stores lineage ``demo-readings`` as ``prepare_lineage`` and the
sealed stage store it: a spec with its readings record (two training families, ``alpha``
and ``beta``; one held-out family, ``gamma``; three hand-written sealed tasks), the
curriculum and its preparation; the pool on three splits; the sealed trials of three
pairs, run once in generation 0 - the root R (root contract, base weights), the
harness-only pair H (the successor contract, base weights) and the trained pair P
(successor contract, adapter ``gen0-lora``). Generation 0 hands on P; generation 1 keeps
it (so pair 2 is pair 1, read once). Each generation's record is written by the real
measurement (:meth:`workers.evaluation_activities.EvaluationActivities._measure`):
``readings`` per reading, ``reading_parts`` (copyable / needs adaptation), the first
reading's lifts (``sealed_lifts``).

Rewards per pair and task (two attempts each, the same reward) are :data:`PASSES`: on the
sealed instances R passes 1 of 4, H 2 and P all 4; on the held-out family R and H pass 0
of 3 and P 1; on the hand-written tasks R passes 1 of 3, H 1 and P 2.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from benchmarks.simulate import make_unlock_tasks
from mindforge.evaluation import PairRef
from mindforge.evaluation.curriculum import ReadingsRecord, SealedReading
from mindforge.hcp import derive, load_contract
from mindforge.payloads import CurriculumSpec, EvaluationSpec, SealedEvaluationInput
from mindforge.store import Lineage, PoolSplit, RunStatus, StoredTask, init_db, lineages, pool, session_scope, trials
from mindforge.store.models import TaskSource
from mindforge.store.search_state import register_contract
from tests.unit.reports.report_store import _Clock, _record
from workers.evaluation_activities import EvaluationActivities

REPO = Path(__file__).resolve().parents[3]
NAME = "demo-readings"
ADAPTER = "gen0-lora"
#: sealed tasks each pair passes, by role: (reading, index within the reading)
PASSES = {
    "R": {("instances", 0), ("tasks", 0)},
    "H": {("instances", 0), ("instances", 2), ("tasks", 0)},
    "P": {("instances", 0), ("instances", 1), ("instances", 2), ("instances", 3), ("families", 0), ("tasks", 0),
          ("tasks", 1)},
}
#: the preparation's record of a curriculum (``Lineage.spec["curriculum_prep"]``)
PREP = {
    "rejected": [
        "alpha-deadbeef: build_failed: docker build exited 1",
        "gamma-0badf00d: nop_passed: doing nothing passes",
    ],
    "warnings": ["family beta admits 3 medium instances of the 4 asked"],
    "validated": 14, "cached": 2, "images": ["mindforge-family-alpha:1"], "seconds": 42.0,
}


class ReadingsStore(BaseModel):
    """What the filled store holds, for assertions."""

    db_url: str
    lineage: str
    root_hash: str
    successor_hash: str
    tasks: dict[str, list[str]]  # reading (and "copyable") -> sealed task hashes


def fill_readings(db_url: str) -> ReadingsStore:
    """Build lineage :data:`NAME` in the database at ``db_url`` (migrated first)."""
    engine = init_db(db_url)
    base = load_contract(REPO / "hcp_contracts" / "baseline.toml")
    root = derive(base, name="fam", revision="1.0.0", edit="tools: bash and finish only",
                  changes={"tools.allow": ["bash", "finish"]})
    successor = derive(root, revision="1.1.0", edit="tools: add read_file",
                       changes={"tools.allow": ["bash", "read_file", "finish"]})
    made = iter(make_unlock_tasks(22, ["plan"]))
    family = {
        "search": [("alpha", next(made)), ("alpha", next(made)), ("beta", next(made)), ("beta", next(made))],
        "selection": [("alpha", next(made)), ("beta", next(made))],
        "instances": [("alpha", next(made)), ("alpha", next(made)), ("beta", next(made)), ("beta", next(made))],
        "families": [("gamma", next(made)) for _ in range(3)],
    }
    written = [next(made) for _ in range(3)]
    sealed = {
        "instances": [t for _f, t in family["instances"]], "families": [t for _f, t in family["families"]],
        "tasks": written,
    }
    copyable = [sealed["instances"][0].task_hash, sealed["instances"][2].task_hash]
    readings = ReadingsRecord(
        training_families=["alpha", "beta"], sealed_families=["gamma"],
        readings={SealedReading(r): sorted(t.task_hash for t in ts) for r, ts in sealed.items()},
        copyable=sorted(copyable),
        family_of={t.task_hash: f for ts in family.values() for f, t in ts},
    )
    curriculum = CurriculumSpec(
        families_dir="/families", families=["alpha", "beta", "gamma"], instances=4, selection_instances=1,
        sealed_fraction=0.5, sealed_families=["gamma"], seed=7,
    )
    spec = {
        "generations": 2, "readings": readings.model_dump(mode="json"),
        "curriculum": curriculum.model_dump(mode="json"), "curriculum_prep": PREP,
    }
    pairs = {
        "R": PairRef(contract_hash=root.content_hash), "H": PairRef(contract_hash=successor.content_hash),
        "P": PairRef(contract_hash=successor.content_hash, adapter=ADAPTER),
    }
    with session_scope(engine) as s:
        s.add(Lineage(id=NAME, name=NAME, spec=spec, status=RunStatus.COMPLETED))
        s.flush()
        for contract, parent in ((base, None), (root, base.content_hash), (successor, root.content_hash)):
            register_contract(s, contract, parent)
        placed = [(PoolSplit(split) if split in ("search", "selection") else PoolSplit.SEALED, f, t)
                  for split, ts in family.items() for f, t in ts]
        placed += [(PoolSplit.SEALED, None, t) for t in written]
        for split, fam, task in placed:
            s.add(StoredTask(
                id=task.task_hash, task_id=task.task_id, path=f"/tasks/{task.task_id}",
                source=TaskSource.FAMILY if fam else TaskSource.BUNDLED, provenance={"family": fam} if fam else {},
            ))
            s.flush()
            pool.add_to_pool(session=s, lineage_id=NAME, task_hash=task.task_hash, split=split, added_generation=0)
        for index in (0, 1):
            lineages.create_generation(session=s, lineage_id=NAME, index=index, contract_hash=successor.content_hash
                                       if index else root.content_hash)
        _sealed_trials(s, sealed, pairs)
        lineages.update_generation(session=s, lineage_id=NAME, index=0, status=RunStatus.COMPLETED, record={
            "successor": {"decided_on": "selection", "contract_hash": successor.content_hash, "promoted": True,
                          "reason": "selection lift +0.500 on 2 tasks", "scores": {}, "trial_ids": []},
            "update": {"outcome": "promoted", "next_pair": pairs["P"].model_dump(), "promotion": {
                "decided_on": "selection", "promoted": True, "reason": "the trained pair beats the parent pair",
                "lift": {"mean": 0.5, "lo": 0.0, "hi": 1.0, "n_tasks": 2, "measured_on": "selection"},
            }},
        })
        lineages.update_generation(session=s, lineage_id=NAME, index=1, status=RunStatus.COMPLETED, record={
            "update": {"outcome": "kept", "next_pair": pairs["P"].model_dump()},
        })
    measure = EvaluationActivities(engine)._measure
    evaluation = EvaluationSpec(attempts=2, lift_resamples=400)
    measure(SealedEvaluationInput(lineage_id=NAME, generation=0, evaluation=evaluation, parent=pairs["R"],
                                  successor=pairs["P"], harness=pairs["H"]))
    measure(SealedEvaluationInput(lineage_id=NAME, generation=1, evaluation=evaluation, parent=pairs["P"],
                                  successor=pairs["P"], root=pairs["R"]))
    engine.dispose()
    tasks = {r: [t.task_hash for t in ts] for r, ts in sealed.items()}
    return ReadingsStore(db_url=db_url, lineage=NAME, root_hash=root.content_hash,
                         successor_hash=successor.content_hash, tasks={**tasks, "copyable": copyable})


def _sealed_trials(session, sealed: dict, pairs: dict[str, PairRef]) -> None:
    """Every pair's sealed trials, two attempts per task, run once (in generation 0) and read by both generations."""
    clock = _Clock()
    for role, pair in pairs.items():
        for reading, tasks in sealed.items():
            for n, task in enumerate(tasks):
                for attempt in range(2):
                    reward = 1.0 if (reading, n) in PASSES[role] else 0.0
                    rec = _record(f"sealed-{role}-{task.task_id}-{attempt}", task, pair.contract_hash, attempt, reward,
                                  clock)
                    rec.adapter = pair.adapter
                    trials.insert_trial(
                        session=session, record=rec, lineage_id=NAME, generation_index=0, stage="sealed"
                    )
