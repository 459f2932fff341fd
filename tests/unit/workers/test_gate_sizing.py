"""Each generation's gates re-sized at its parent's measured selection rate, on a real SQLite store."""

from __future__ import annotations

import pytest

from mindforge.cli.lineage_status import gate_power_lines
from mindforge.evaluation import PairRef, PoolSplit
from mindforge.evaluation.sizing import GatesAtRate
from mindforge.payloads import EvaluationSpec, LineageSpec
from mindforge.store import LineageCreate, StoredTask, TaskSource, init_db, lineages, pool, session_scope, trials
from mindforge.trials.record import FailureClass, TrialRecord
from workers.gate_sizing import gate_power_record

PARENT = PairRef(contract_hash="a" * 64, adapter="gen0-lora")
OTHER = PairRef(contract_hash="b" * 64)


@pytest.fixture
def store(tmp_path):
    """12 selection tasks; generation 0 ran the parent pair (6 of 24 trials passed) and another pair (all passed)."""
    engine = init_db(f"sqlite:///{tmp_path / 'mindforge.db'}")
    spec = LineageSpec(name="gates", tasks=[], contract_path="/c.toml",
                       evaluation=EvaluationSpec(attempts=2, successor_candidates=1, race_budget=2))
    with session_scope(engine) as s:
        lineage = lineages.create_lineage(
            session=s, lineage_in=LineageCreate(name="gates", spec=spec.model_dump(mode="json"))
        )
        for index in (0, 1):
            lineages.create_generation(session=s, lineage_id=lineage.id, index=index)
        for n in range(12):
            task = f"{n:064x}"
            s.add(StoredTask(id=task, task_id=f"sel-{n}", path=f"/tasks/sel-{n}", source=TaskSource.BUNDLED))
            s.flush()
            pool.add_to_pool(session=s, lineage_id=lineage.id, task_hash=task, split=PoolSplit.SELECTION,
                             added_generation=0)
            for pair in (PARENT, OTHER):
                for attempt in range(2):
                    passed = pair == OTHER or (n < 3)  # the parent passes 3 tasks, both attempts: 6 of 24
                    record = TrialRecord(
                        trial_id=f"{pair.contract_hash[:1]}-{n}-{attempt}", run_id="r", task_id=f"sel-{n}",
                        task_hash=task, agent="model", contract_hash=pair.contract_hash, adapter=pair.adapter,
                        attempt=attempt, reward=1.0 if passed else 0.0,
                        failure_class=None if passed else FailureClass.TASK_FAILED,
                    )
                    trials.insert_trial(session=s, record=record, lineage_id=lineage.id, generation_index=0,
                                        stage="selection")
        lineage_id = lineage.id
    yield engine, lineage_id
    engine.dispose()


def test_the_gates_are_re_sized_at_the_parents_measured_rate(store) -> None:
    engine, lineage_id = store
    with session_scope(engine) as s:
        first = GatesAtRate.model_validate(gate_power_record(s, lineage_id, 0, PARENT))
        later = GatesAtRate.model_validate(gate_power_record(s, lineage_id, 1, PARENT))
    # generation 0's parent has no selection trial before it: the gates stay as sized at lineage start
    assert first.parent_rate is None and "sized at lineage start" in first.note
    assert later.parent_rate == 0.25 and later.parent_trials == 24  # its own trials only, not the other pair's
    assert [g.gate for g in later.gates] == ["successor", "promotion"]
    for gate in later.gates:  # the figures docs/evidence.md quotes (seeded simulation, 1000 draws)
        assert (gate.tasks, gate.attempts) == (12, 2)
        assert gate.power_at == {"0.10": 0.139, "0.25": 0.472}  # 12 tasks cannot find +0.25 over 25% at 80%
        assert gate.min_detectable_lift == pytest.approx(0.38, abs=0.005)
        assert gate.attempts_for == {"0.10": None, "0.25": 5}
    lines = later.lines()
    assert lines[0].startswith("gates' power at the parent's measured selection rate 0.25 (24 trials")
    assert "power needs" in lines[1] and "attempts a task" in lines[1]


def test_lineage_status_prints_each_generations_gate_power(store) -> None:
    engine, lineage_id = store
    with session_scope(engine) as s:
        power = gate_power_record(s, lineage_id, 1, PARENT)
        lineages.update_generation(session=s, lineage_id=lineage_id, index=1, record={"gate_power": power})
        text = gate_power_lines(lineages.list_generations(session=s, lineage_id=lineage_id))
    assert text[0].startswith("generation 1: gates' power at the parent's measured selection rate 0.25")
    assert len(text) == 3 and text[1].startswith("  successor") and text[2].startswith("  promotion")
