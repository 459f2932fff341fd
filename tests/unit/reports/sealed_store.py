"""A real SQLite store holding a one-generation lineage with chosen sealed rewards: shared by report tests.

:func:`fill_sealed` stores the sealed trials of two pairs - the root (the root contract,
base weights) and the pair generation 0 hands on (same contract, adapter ``gen0-lora``) -
with the rewards the test names, task by task and attempt by attempt, so a test can build
the edge cases of the sealed plots: every reward 0, every reward 1, unequal attempts per
task. The generation's compounding row and sealed lift are measured by the real code
(:func:`mindforge.evaluation.compounding.measure_generation`) on the stored trials.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.simulate import make_unlock_tasks
from mindforge.evaluation import PairRef
from mindforge.evaluation.compounding import measure_generation
from mindforge.hcp import load_contract
from mindforge.store import (
    Lineage,
    PoolSplit,
    RunStatus,
    StoredTask,
    TaskSource,
    init_db,
    lineages,
    pool,
    session_scope,
    trials,
)
from mindforge.store.search_state import register_contract
from tests.unit.reports.report_store import _Clock, _record

REPO = Path(__file__).resolve().parents[3]
#: the adapter of the pair generation 0 hands on
ADAPTER = "gen0-lora"


def fill_sealed(
    db_url: str, name: str, root: list[list[float]], successor: list[list[float]], *, record: dict | None = None
) -> None:
    """Store lineage ``name`` in the database at ``db_url`` (migrated first) with these sealed rewards.

    Args:
        db_url: a SQLite URL.
        name: the lineage's name.
        root: per sealed task, the root pair's rewards, one per attempt (0..1).
        successor: the same for the pair generation 0 hands on; as many tasks as ``root``.
        record: extra keys merged into generation 0's record (a promotion decision, say).

    Raises:
        ValueError: ``root`` and ``successor`` name different numbers of tasks.
    """
    if len(root) != len(successor):
        raise ValueError(f"{len(root)} root tasks but {len(successor)} successor tasks")
    engine = init_db(db_url)
    contract = load_contract(REPO / "hcp_contracts" / "baseline.toml")
    tasks = make_unlock_tasks(len(root), ["plan"])
    clock = _Clock()
    with session_scope(engine) as s:
        # stored as the lineage workflow's first activity stores it: its id is its name
        lineage = Lineage(id=name, name=name, spec={"generations": 1}, status=RunStatus.COMPLETED)
        s.add(lineage)
        s.flush()
        register_contract(s, contract, None)
        for task in tasks:
            s.add(
                StoredTask(
                    id=task.task_hash, task_id=task.task_id, path=f"/t/{task.task_id}", source=TaskSource.BUNDLED
                ),
            )
            s.flush()
            pool.add_to_pool(
                session=s, lineage_id=lineage.id, task_hash=task.task_hash, split=PoolSplit.SEALED, added_generation=0
            )
        lineages.create_generation(session=s, lineage_id=lineage.id, index=0, contract_hash=contract.content_hash)
        records = []
        for adapter, rewards in (("", root), (ADAPTER, successor)):
            for task, attempts in zip(tasks, rewards, strict=True):
                for attempt, reward in enumerate(attempts):
                    rec = _record(
                        f"sealed-{adapter or 'base'}-{task.task_id}-{attempt}",
                        task,
                        contract.content_hash,
                        attempt,
                        reward,
                        clock,
                    )
                    rec.adapter = adapter
                    trials.insert_trial(
                        session=s, record=rec, lineage_id=lineage.id, generation_index=0, stage="sealed"
                    )
                    records.append(rec)
        row = measure_generation(
            records,
            {t.task_hash for t in tasks},
            generation=0,
            parent=PairRef(contract_hash=contract.content_hash),
            successor=PairRef(contract_hash=contract.content_hash, adapter=ADAPTER),
            attempts=2,
            resamples=2000,
        )
        lineages.update_generation(
            session=s,
            lineage_id=lineage.id,
            index=0,
            status=RunStatus.COMPLETED,
            record={
                "compounding": row.model_dump(mode="json"),
                "sealed_lift": row.lift_vs_prev,
                "sealed_lift_vs_root": None,
                **(record or {}),
            },
        )
    engine.dispose()
