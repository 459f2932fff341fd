"""The one scorer, the paired lift and the two selection-split decisions, on hand-made trial tables."""

from __future__ import annotations

import pytest

from mindforge.evaluation import (
    PairRef,
    PoolSplit,
    choose_successor,
    decide_promotion,
    paired_lift,
    score_tasks,
)
from mindforge.trials.record import FailureClass, TrialRecord

P, C, N = "p" * 64, "c" * 64, "n" * 64


def trial(
    task: str, attempt: int, reward: float | None, *, contract: str = P, adapter: str = "", failure=None
) -> TrialRecord:
    if failure is None and reward is not None and reward < 1.0:
        failure = FailureClass.TASK_FAILED
    return TrialRecord(
        trial_id=f"{task}/{contract[:2]}/{adapter}/{attempt}", run_id="r", task_id=task, task_hash=f"h-{task}",
        agent="model", contract_hash=contract, adapter=adapter, attempt=attempt, reward=reward, failure_class=failure,
    )


def test_the_scorer_averages_usable_attempts_and_counts_errors_apart():
    records = [
        trial("a", 0, 1.0), trial("a", 1, 0.0),
        trial("a", 2, None, failure=FailureClass.INFRA_ERROR),
        trial("b", 0, None, failure=FailureClass.VERIFIER_ERROR),
        trial("z", 0, 1.0),  # not in the task set
        trial("a", 0, 1.0, contract=C),  # another pair
    ]
    scores = score_tasks(records, PairRef(contract_hash=P), {"h-a", "h-b"})
    assert scores.scores == {"h-a": 0.5}  # b has no usable attempt: absent, never a 0
    assert (scores.usable_trials, scores.excluded_trials) == (2, 2)
    assert scores.trial_ids == sorted(["a/pp//0", "a/pp//1", "a/pp//2", "b/pp//0"])


def test_paired_lift_pairs_tasks_and_skips_errors():
    parent, successor = PairRef(contract_hash=P), PairRef(contract_hash=C, adapter="lin-g0-r0")
    s = {"contract": C, "adapter": "lin-g0-r0"}
    records = [
        trial("x", 0, 0.0), trial("x", 1, 1.0),  # parent 0.5 on x
        trial("x", 0, 1.0, **s), trial("x", 1, 1.0, **s),
        trial("y", 0, 0.0), trial("y", 1, 0.0),  # parent 0.0 on y
        trial("y", 0, 1.0, **s), trial("y", 1, None, failure=FailureClass.VERIFIER_ERROR, **s),
        trial("z", 0, 1.0),  # parent only: unpaired
        trial("s", 0, 1.0, **s),  # not on the split: ignored
    ]
    report = paired_lift(
        records, parent, successor, {"h-x", "h-y", "h-z"}, measured_on=PoolSplit.SEALED, resamples=500, seed=1
    )
    assert report.measured_on == PoolSplit.SEALED and report.n_tasks == 2 and report.unpaired_tasks == 1
    assert report.excluded_trials == 1 and report.n_trials == 7
    assert report.parent_score == pytest.approx(0.25) and report.successor_score == pytest.approx(1.0)
    assert report.mean == pytest.approx(0.75) and report.lo <= report.mean <= report.hi
    assert report.per_task["h-y"] == {"parent": 0.0, "successor": 1.0}  # the verifier error is not a 0
    assert report.summary() == {
        "mean": report.mean, "lo": report.lo, "hi": report.hi, "n_tasks": 2, "n_trials": 7,
        "measured_on": "sealed", "baseline": "parent", "unit": "task", "n_units": 2,
        "method": "percentile bootstrap by task",
    }


def test_paired_lift_without_pairs_has_a_reason():
    report = paired_lift(
        [trial("x", 0, 1.0)], PairRef(contract_hash=P), PairRef(contract_hash=C), {"h-x"}, measured_on=PoolSplit.SEALED
    )
    assert report.mean is None and report.n_tasks == 0 and "both pairs" in report.reason
    empty = paired_lift([], PairRef(contract_hash=P), PairRef(contract_hash=C), set(), measured_on=PoolSplit.SEALED)
    assert "no sealed tasks" in empty.reason


def _table(contract_scores: dict[str, list[float]], adapter: str = "") -> list[TrialRecord]:
    return [
        trial(f"t{i}", 0, r, contract=c, adapter=adapter)
        for c, rewards in contract_scores.items()
        for i, r in enumerate(rewards)
    ]


def test_successor_is_promoted_only_on_selection_evidence():
    tasks = {f"h-t{i}" for i in range(8)}
    records = _table({P: [0.0] * 8, C: [1.0] * 8, N: [float(i % 2) for i in range(8)]})
    choice = choose_successor(records, PairRef(contract_hash=P), [C, N], tasks)
    assert choice.decided_on == PoolSplit.SELECTION and choice.promoted and choice.contract_hash == C
    assert choice.lift == (1.0, 1.0, 1.0) and choice.n_tasks == 8 and choice.scores[C] == 1.0
    assert choice.considered[N]["lift"][1] < choice.considered[C]["lift"][1]
    assert set(choice.trial_ids) == {r.trial_id for r in records}
    # trials on other tasks are never read, even when they would change the choice
    other = _table({C: [0.0] * 8}, adapter="")
    other = [r.model_copy(update={"task_hash": "sealed-" + r.task_hash, "trial_id": "x" + r.trial_id}) for r in other]
    assert (
        choose_successor(records + other, PairRef(contract_hash=P), [C, N], tasks).model_dump() == choice.model_dump()
    )
    # too few tasks, or an interval reaching 0, keeps the parent
    few = choose_successor(records, PairRef(contract_hash=P), [C], {"h-t0", "h-t1"}, min_tasks=5)
    assert not few.promoted and "fewer than 5" in few.considered[C]["skipped"]
    assert "no candidate had evidence on selection (1 skipped: fewer than 5" in few.reason
    noisy = _table({P: [0.0] * 8, C: [1.0, 1.0] + [0.0] * 6})
    kept = choose_successor(noisy, PairRef(contract_hash=P), [C], tasks)
    assert not kept.promoted
    assert kept.reason.startswith("no candidate's selection lift passes the gate (1 measured: selection lift +0.250")
    # a candidate with no task in common with the parent cannot be compared, and the decision says so
    apart = _table({P: [0.0] * 4}) + [r.model_copy(update={"task_hash": "h-u" + r.task_hash[3:]})
                                      for r in _table({C: [1.0] * 4})]
    elsewhere = choose_successor(apart, PairRef(contract_hash=P), [C], tasks | {f"h-ut{i}" for i in range(4)})
    assert not elsewhere.promoted and elsewhere.cannot_compare and elsewhere.reason.startswith("cannot compare")
    assert elsewhere.considered[C] == {
        "n_tasks": 0, "cannot_compare": True, "skipped": "cannot compare: the two pairs share no scored selection task"
    }
    # the reason never claims a lift was measured when no candidate ran
    alone = choose_successor(noisy, PairRef(contract_hash=P), [], tasks)
    assert not alone.promoted and alone.reason.startswith("no candidate contract besides the parent")


def test_promotion_gate_promotes_on_a_lower_bound_above_0_or_a_declared_margin():
    tasks = {f"h-t{i}" for i in range(6)}
    without, with_adapter = PairRef(contract_hash=C), PairRef(contract_hash=C, adapter="lin-g0-r0")
    base = _table({C: [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]})
    better = decide_promotion(
        base + _table({C: [1.0] * 5 + [0.0]}, "lin-g0-r0"), without, with_adapter, tasks, min_tasks=5
    )
    assert (
        better.promoted and better.decided_on == PoolSplit.SELECTION and better.lift.measured_on == PoolSplit.SELECTION
    )
    assert better.lift.mean == pytest.approx(0.5) and better.lift.lo > 0 and len(better.trial_ids) == 12
    assert "95% lower bound is above 0 on at least 5 paired" in better.rule and better.min_tasks == 5
    assert "mean is above 0" in better.rule and "a tie never passes" in better.rule
    # not worse is not better: a tie keeps the parent adapter, margin or not
    tie = base + _table({C: [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]}, "lin-g0-r0")
    same = decide_promotion(tie, without, with_adapter, tasks, min_tasks=5)
    assert not same.promoted and "no gain (a tie or a loss never passes)" in same.reason
    # a declared non-inferiority margin is stated in the rule, and a tie still does not pass (1 vs 1 on every
    # passed task gave a lower bound of 0, above -margin)
    margin = decide_promotion(tie, without, with_adapter, tasks, min_tasks=5, margin=0.1)
    assert not margin.promoted and "non-inferiority margin of 0.1" in margin.rule and margin.lift.lo == 0.0
    assert "no gain" in margin.reason
    # a gain whose lower bound reaches 0 passes a declared margin (and only then)
    gain = decide_promotion(
        base + _table({C: [1.0, 1.0, 0.0, 1.0, 0.0, 0.0]}, "lin-g0-r0"), without, with_adapter, tasks, min_tasks=5,
        margin=0.1,
    )
    assert gain.promoted and gain.lift.mean > 0 and gain.lift.lo == 0.0
    assert not decide_promotion(
        base + _table({C: [1.0, 1.0, 0.0, 1.0, 0.0, 0.0]}, "lin-g0-r0"), without, with_adapter, tasks, min_tasks=5
    ).promoted
    worse = decide_promotion(
        base + _table({C: [0.0] * 6}, "lin-g0-r0"), without, with_adapter, tasks, min_tasks=5, margin=0.1
    )
    assert not worse.promoted and "no gain" in worse.reason
    none = decide_promotion(base, without, with_adapter, tasks, min_tasks=1)
    assert not none.promoted and none.cannot_compare and none.reason.startswith("cannot compare")


def test_promotion_refuses_an_all_zero_comparison_and_respects_min_tasks():
    tasks = {f"h-t{i}" for i in range(6)}
    without, with_adapter = PairRef(contract_hash=C), PairRef(contract_hash=C, adapter="lin-g0-r0")
    zeros = _table({C: [0.0] * 6}) + _table({C: [0.0] * 6}, "lin-g0-r0")
    for margin in (0.0, 0.1, 0.5):  # a lift of 0.000 (0..0) on no passes is no evidence, whatever the margin
        decision = decide_promotion(zeros, without, with_adapter, tasks, min_tasks=1, margin=margin)
        assert not decision.promoted and "both pairs score 0 on all 6 selection tasks" in decision.reason
        assert decision.lift.mean == 0.0 and len(decision.trial_ids) == 12
    # a clear win on 3 paired tasks is not enough when the spec asks for 5
    clear = _table({C: [0.0] * 3}) + _table({C: [1.0] * 3}, "lin-g0-r0")
    few = decide_promotion(clear, without, with_adapter, tasks, min_tasks=5)
    assert not few.promoted and "only 3 paired selection task(s), fewer than 5" in few.reason
    assert decide_promotion(clear, without, with_adapter, tasks, min_tasks=3).promoted
    with pytest.raises(ValueError, match="margin"):
        decide_promotion(clear, without, with_adapter, tasks, min_tasks=3, margin=-0.1)
    with pytest.raises(TypeError):  # min_tasks has no default: the caller passes the spec's
        decide_promotion(clear, without, with_adapter, tasks)


def test_the_pair_gate_judges_the_trained_pair_against_the_kept_pair():
    from mindforge.evaluation.decisions import decide_pair

    tasks = {f"h-t{i}" for i in range(8)}
    parent = PairRef(contract_hash=P)  # the generation's parent pair: passes nothing
    kept = PairRef(contract_hash=N)  # the successor check's new harness with the parent's adapter
    trained = PairRef(contract_hash=C, adapter="lin-g0-r0")  # that harness, the new adapter
    records = [trial(f"t{i}", a, 0.0) for i in range(8) for a in range(2)]
    harness = [trial(f"t{i}", a, float(i < 4), contract=N) for i in range(8) for a in range(2)]
    # an adapter that changes nothing: the trained pair scores as the kept pair does
    same = [r.model_copy(update={"contract_hash": C, "adapter": "lin-g0-r0", "trial_id": "t" + r.trial_id})
            for r in harness]
    # judged against the parent pair, the harness's lift would carry it (+0.5, lower bound above 0) ...
    carried = decide_pair(records + same, parent, trained, tasks, min_tasks=5, resamples=500)
    assert carried.promoted and carried.lift.mean == pytest.approx(0.5)
    # ... against the kept pair it is a tie, and a tie never passes, margin or not
    for margin in (0.0, 0.1):
        nothing = decide_pair(records + harness + same, kept, trained, tasks, min_tasks=5, margin=margin,
                              resamples=500)
        assert not nothing.promoted and nothing.lift.mean == 0.0 and "no gain" in nothing.reason
        assert "the kept pair is handed on" in nothing.reason and "kept pair" in nothing.rule
        assert nothing.lift.parent == kept and nothing.lift.successor == trained
    # the adapter's own gain (every task passed) promotes it
    gained = [r.model_copy(update={"reward": 1.0, "failure_class": None}) for r in same]
    wins = decide_pair(records + harness + gained, kept, trained, tasks, min_tasks=5, resamples=500)
    assert wins.promoted and wins.lift.mean == pytest.approx(0.5) and wins.lift.lo > 0
    # two pairs with no task in common cannot be compared: the decision says so
    apart = [r.model_copy(update={"task_hash": "h-u" + r.task_hash[3:]}) for r in gained]
    split = tasks | {f"h-ut{i}" for i in range(8)}
    none = decide_pair(harness + apart, kept, trained, split, min_tasks=5, resamples=500)
    assert not none.promoted and none.cannot_compare and none.reason.startswith("cannot compare")
