"""Coverage ledger, intervals, paired bootstrap and successor choice on hand-computed examples."""

from __future__ import annotations

import pytest

from mindforge.ledger import Ledger, bootstrap_lift, choose_successor, heldout_scores, wilson_interval
from mindforge.trial import FailureClass, TrialRecord


def _ledger() -> Ledger:
    # tasks A, B, C; contracts X (the base) and Y; attempts in spending order
    ledger = Ledger(tasks=["A", "B", "C"])
    ledger.add("A", "X", 0.0)
    ledger.add("B", "X", 0.0)
    ledger.add("A", "Y", 1.0)  # A covered after 3 attempts
    ledger.add("C", "X", None, usable=False)  # an infra error: spent, not usable
    ledger.add("B", "Y", 1.0)  # B covered after 5
    ledger.add("A", "X", 1.0)  # X solves A too, coverage unchanged
    ledger.add("D", "Y", 1.0)  # D is not in the task set
    return ledger


def test_cells_coverages_and_curve_by_hand() -> None:
    ledger = _ledger()
    assert ledger.cells[("A", "X")].model_dump() == {"attempts": 2, "usable": 2, "successes": 1}
    assert ledger.cells[("C", "X")].model_dump() == {"attempts": 1, "usable": 0, "successes": 0}
    assert ledger.cumulative() == {"A", "B"}
    assert ledger.coverage_by_contract() == {"X": 1, "Y": 2}
    assert ledger.single_contract() == ("Y", 2)
    assert ledger.coverage_curve() == [(0, 0), (1, 0), (2, 0), (3, 1), (4, 1), (5, 2), (6, 2), (7, 2)]
    summary = ledger.summary()
    assert (summary.tasks, summary.attempts, summary.cumulative, summary.single_contract) == (3, 7, 2, 2)
    rate = ledger.rate("X")
    assert (rate.successes, rate.n) == (1, 3)  # the infra error is not in the rate
    assert ledger.rate("Y", "A").rate == 1.0


def test_cumulative_is_an_upper_bound_of_single_contract_coverage() -> None:
    ledger = Ledger()
    for task, contract in [("a", "X"), ("b", "Y"), ("c", "Z"), ("d", "Z")]:
        ledger.add(task, contract, 1.0)
    summary = ledger.summary()
    assert summary.cumulative == 4 and summary.single_contract == 2 and summary.best_contract == "Z"


@pytest.mark.parametrize(
    ("successes", "n", "lo", "hi"),
    [(0, 10, 0.0, 0.2775), (5, 10, 0.2366, 0.7634), (10, 10, 0.7225, 1.0), (1, 1, 0.2065, 1.0), (0, 0, 0.0, 1.0)],
)
def test_wilson_intervals_match_published_values(successes, n, lo, hi) -> None:
    interval = wilson_interval(successes, n)
    assert interval.lo == pytest.approx(lo, abs=1e-4) and interval.hi == pytest.approx(hi, abs=1e-4)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_bootstrap_lift_by_hand() -> None:
    assert bootstrap_lift([0, 0, 0, 0], [1, 1, 1, 1]) == (1.0, 1.0, 1.0)
    assert bootstrap_lift([1, 0.5], [0.5, 0.0]) == (-0.5, -0.5, -0.5)  # every task drops by 0.5
    # diffs 0 and 1: resample means are 0, 0.5 or 1 with probability 1/4, 1/2, 1/4
    mean, lo, hi = bootstrap_lift([0, 0], [0, 1], n=2000, seed=7)
    assert (mean, lo, hi) == (0.5, 0.0, 1.0)
    assert bootstrap_lift([0, 0, 1], [1, 0, 1], seed=1) == bootstrap_lift([0, 0, 1], [1, 0, 1], seed=1)
    with pytest.raises(ValueError):
        bootstrap_lift([0, 1], [1])
    with pytest.raises(ValueError):
        bootstrap_lift([], [])


def test_successor_is_promoted_only_on_unsearched_held_out_tasks() -> None:
    tasks = [f"t{i}" for i in range(8)]
    heldout = {
        "P": {t: 0.0 for t in tasks},
        "C": {t: 1.0 for t in tasks},
        "N": {t: float(i % 2) for i, t in enumerate(tasks)},
    }
    choice = choose_successor("P", heldout)
    assert choice.promoted and choice.contract_hash == "C" and choice.lift == (1.0, 1.0, 1.0) and choice.n_tasks == 8
    assert choice.considered["N"]["lift"][1] < choice.considered["C"]["lift"][1]
    # C was searched on six of the tasks: two unsearched tasks are not enough evidence
    fallback = choose_successor("P", heldout, {"C": set(tasks[:6])}, min_tasks=5)
    assert fallback.contract_hash == "N" and "fewer than 5" in fallback.considered["C"]["skipped"]
    only_c = {"P": heldout["P"], "C": heldout["C"]}
    kept = choose_successor("P", only_c, {"C": set(tasks[:6])}, min_tasks=5)
    assert not kept.promoted and kept.contract_hash == "P" and kept.lift is None
    # a lift whose interval reaches 0 keeps the parent
    noisy = {"P": {t: 0.0 for t in tasks}, "C": {t: (1.0 if i < 2 else 0.0) for i, t in enumerate(tasks)}}
    assert not choose_successor("P", noisy).promoted


def test_heldout_scores_average_usable_rewards() -> None:
    def rec(i, task, contract, reward, cls=None):
        return TrialRecord(
            trial_id=f"t{i}",
            run_id="r",
            task_id=task,
            task_hash=task,
            agent="model",
            contract_hash=contract,
            reward=reward,
            failure_class=cls,
        )

    records = [
        rec(1, "h1", "P", 1.0),
        rec(2, "h1", "P", 0.0, FailureClass.TASK_FAILED),
        rec(3, "h1", "P", None, FailureClass.INFRA_ERROR),
        rec(4, "s1", "P", 1.0),  # not held out
    ]
    assert heldout_scores(records, {"h1"}) == {"P": {"h1": 0.5}}
