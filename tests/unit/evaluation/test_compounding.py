"""A generation's compounding row: pair scores, paired lifts over the parent and the root, attribution."""

from __future__ import annotations

import pytest

from mindforge.evaluation import PairRef, PoolSplit, paired_lift
from mindforge.evaluation.compounding import measure_generation, tasks_digest
from mindforge.trials.record import FailureClass, TrialRecord

OLD, NEW, ROOT = "o" * 64, "n" * 64, "r" * 64
TASKS = {f"h-{t}" for t in "abcd"}


def trial(task: str, attempt: int, reward: float | None, contract: str, adapter: str = "", failure=None) -> TrialRecord:
    if failure is None and reward is not None and reward < 1.0:
        failure = FailureClass.TASK_FAILED
    return TrialRecord(
        trial_id=f"{task}/{contract[:2]}/{adapter}/{attempt}", run_id="r", task_id=task, task_hash=f"h-{task}",
        agent="model", contract_hash=contract, adapter=adapter, attempt=attempt, reward=reward, failure_class=failure,
    )


def pair_trials(contract: str, adapter: str, solved: dict[str, int]) -> list[TrialRecord]:
    """Two attempts per task; ``solved[task]`` of them pass."""
    return [
        trial(t, a, 1.0 if a < solved.get(t, 0) else 0.0, contract, adapter) for t in "abcd" for a in range(2)
    ]


PARENT = PairRef(contract_hash=OLD, adapter="r0")
HARNESS = PairRef(contract_hash=NEW, adapter="r0")  # the new contract's harness, the old adapter
SUCCESSOR = PairRef(contract_hash="s" * 64, adapter="r1")


def test_both_changed_splits_the_lift_into_a_harness_and_a_weights_part_that_add_up():
    records = (
        pair_trials(OLD, "r0", {"a": 1})
        + pair_trials(NEW, "r0", {"a": 2, "b": 1})
        + pair_trials("s" * 64, "r1", {"a": 2, "b": 2, "c": 1})
        + pair_trials(ROOT, "", {})
    )
    row = measure_generation(
        records, TASKS, generation=2, parent=PARENT, successor=SUCCESSOR, root=PairRef(contract_hash=ROOT),
        harness=HARNESS, attempts=2, resamples=500,
    )
    assert row.sealed_tasks == sorted(TASKS) and row.sealed_tasks_sha256 == tasks_digest(reversed(sorted(TASKS)))
    assert row.parent.score == pytest.approx(0.5 / 4) and row.successor.score == pytest.approx(2.5 / 4)
    assert row.successor.passed == 5 and row.successor.n_trials == 8 and row.root.score == 0.0
    assert row.lift_vs_prev["mean"] == pytest.approx(0.5) and row.lift_vs_prev["n_tasks"] == 4
    assert row.lift_vs_root["mean"] == pytest.approx(2.5 / 4) and row.lift_vs_root["baseline"] == "root"
    harness, weights = row.attribution["harness"], row.attribution["weights"]
    assert harness.status == weights.status == "measured"
    assert harness.lift["mean"] == pytest.approx(1.0 / 4) and weights.lift["mean"] == pytest.approx(1.0 / 4)
    assert harness.lift["mean"] + weights.lift["mean"] == pytest.approx(row.lift_vs_prev["mean"])
    assert row.harness is not None and row.harness.score == pytest.approx(1.5 / 4)


def test_lift_vs_root_is_paired_on_the_tasks_both_pairs_ran():
    """A task with no usable attempt under the root is left out of the pairing, not scored 0."""
    records = pair_trials(OLD, "r0", {}) + pair_trials("s" * 64, "r1", {"a": 2, "b": 2})
    records += [trial(t, a, 0.0, ROOT) for t in "abc" for a in range(2)]
    records += [trial("d", a, None, ROOT, failure=FailureClass.INFRA_ERROR) for a in range(2)]
    row = measure_generation(
        records, TASKS, generation=1, parent=PARENT, successor=SUCCESSOR, root=PairRef(contract_hash=ROOT),
        resamples=500,
    )
    want = paired_lift(
        records, PairRef(contract_hash=ROOT), SUCCESSOR, TASKS, measured_on=PoolSplit.SEALED, baseline="root",
        resamples=500,
    )
    assert row.lift_vs_root == want.summary() and row.lift_vs_root["n_tasks"] == 3
    assert row.lift_vs_root["mean"] == pytest.approx(2 / 3)  # paired on a, b, c; d unpaired
    assert row.lift_vs_prev["n_tasks"] == 4 and row.lift_vs_prev["mean"] == pytest.approx(0.5)


def test_one_side_unchanged_gives_the_whole_lift_to_the_other_and_a_missing_pair_is_not_run():
    records = pair_trials(OLD, "r0", {}) + pair_trials(NEW, "r0", {"a": 2})
    only_contract = PairRef(contract_hash=NEW, adapter="r0")
    row = measure_generation(
        records, TASKS, generation=0, parent=PARENT, successor=only_contract, harness=only_contract
    )
    assert row.attribution["weights"].status == "unchanged" and "adapter" in row.attribution["weights"].reason
    assert row.attribution["harness"].lift == row.lift_vs_prev and row.lift_vs_prev["mean"] == pytest.approx(0.25)
    assert row.root is None and row.lift_vs_root == {**row.lift_vs_prev, "baseline": "root"}  # pair 0 is the parent
    only_adapter = PairRef(contract_hash=OLD, adapter="r1")
    row = measure_generation(records + pair_trials(OLD, "r1", {"b": 1}), TASKS, generation=0, parent=PARENT,
                             successor=only_adapter, harness=None)
    assert row.attribution["harness"].status == "unchanged" and row.attribution["weights"].status == "measured"
    # both changed but the harness-only pair has no trial: both parts say so, the whole lift stays
    no_harness = pair_trials(OLD, "r0", {}) + pair_trials("s" * 64, "r1", {"a": 2})
    row = measure_generation(no_harness, TASKS, generation=0, parent=PARENT, successor=SUCCESSOR, harness=HARNESS)
    assert {p.status for p in row.attribution.values()} == {"not_run"} and row.lift_vs_prev["mean"] == 0.25
    assert "harness-only pair" in row.attribution["harness"].reason
    kept = measure_generation(records, TASKS, generation=3, parent=PARENT, successor=PARENT)
    assert kept.lift_vs_prev is None and "kept its parent pair" in kept.lift_vs_prev_reason
    assert kept.parent.n_trials == 8 and {p.status for p in kept.attribution.values()} == {"unchanged"}
