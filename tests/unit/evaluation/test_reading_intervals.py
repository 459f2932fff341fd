"""A sealed reading's interval by unit: families resampled as the units they are, no certainty from no pass."""

from __future__ import annotations

import numpy as np
import pytest

from mindforge.evaluation.intervals import METHOD, clustered_lift_bounds, clustered_lift_interval
from mindforge.evaluation.lift import paired_lift
from mindforge.evaluation.scoring import PairRef
from mindforge.evaluation.splits import PoolSplit
from mindforge.evaluation.stats import bootstrap_lift
from mindforge.trials.record import TrialRecord


def test_no_pass_under_either_pair_is_not_a_certain_zero() -> None:
    # the percentile bootstrap says [0, 0]: 12 tasks, 24 trials each, as if nothing could have passed
    assert bootstrap_lift([0.0] * 12, [0.0] * 12)[1:] == (0.0, 0.0)
    got = clustered_lift_interval([0.0] * 12, [0.0] * 12, list(range(12)), parent_trials=24, child_trials=24)
    assert got.mean == 0.0 and got.lo < -0.1 and 0.1 < got.hi < 0.25 and got.units == 12 and got.method == METHOD
    # more trials, a tighter bound (Wilson on the trials when nothing varies)
    more = clustered_lift_interval([0.0] * 12, [0.0] * 12, list(range(12)), parent_trials=96, child_trials=96)
    assert more.hi < got.hi


def test_few_units_say_little_whatever_the_tasks() -> None:
    one = clustered_lift_interval([0.0, 0.0, 0.0], [1.0, 1.0, 1.0], ["a", "a", "a"], parent_trials=6, child_trials=6)
    assert (one.lo, one.hi, one.units) == (-1.0, 1.0, 1)  # one family says nothing about the others
    two = clustered_lift_interval([0.0] * 6, [1.0, 1.0, 1.0, 0.0, 0.0, 0.0], list("aaabbb"), parent_trials=12,
                                  child_trials=12)
    as_tasks = clustered_lift_interval([0.0] * 6, [1.0, 1.0, 1.0, 0.0, 0.0, 0.0], list("abcdef"), parent_trials=12,
                                       child_trials=12)
    assert two.units == 2 and as_tasks.units == 6
    assert two.hi - two.lo > 1.4 > as_tasks.hi - as_tasks.lo  # two families, about two units of evidence


def test_the_families_reading_widens_with_family_level_effects() -> None:
    """Seeded: 12 families x 3 instances, the same mean lift (0.25) either on every task or on half the families."""
    rng = np.random.default_rng(7)
    draws, families, per = 400, 12, 3
    units = [f for f in range(families) for _ in range(per)]
    parent_rate = 0.25
    even = np.full((draws, families), 0.25)
    varied = np.where(rng.random((draws, families)) < 0.5, 0.5, 0.0)  # a family gains 0.5 or nothing

    def widths(effects: np.ndarray, by_family: bool) -> tuple[float, float]:
        rate = np.repeat(parent_rate + effects, per, axis=1)
        parent = (rng.random((draws, families * per, 2)) < parent_rate).mean(axis=2)
        child = (rng.random((draws, families * per, 2)) < rate[:, :, None]).mean(axis=2)
        given = units if by_family else list(range(families * per))
        _mean, lo, hi = clustered_lift_bounds(parent, child, given, parent_trials=72, child_trials=72)
        truth = 0.25
        return float((hi - lo).mean()), float(((lo <= truth) & (truth <= hi)).mean())

    width_even, _ = widths(even, by_family=True)
    width_varied, covered = widths(varied, by_family=True)
    width_as_tasks, covered_as_tasks = widths(varied, by_family=False)
    assert width_varied > width_even * 1.15  # family-level effects widen the interval by family
    assert covered >= 0.93 and covered_as_tasks < covered  # taking instances as independent covers less
    assert width_as_tasks < width_varied


def test_many_draws_at_once_agree_with_one_at_a_time() -> None:
    rng = np.random.default_rng(3)
    parent, child = rng.integers(0, 3, (20, 8)) / 2, rng.integers(0, 3, (20, 8)) / 2
    units = ["a", "a", "b", "c", "c", "d", "e", "f"]
    mean, lo, hi = clustered_lift_bounds(parent, child, units, parent_trials=16, child_trials=16)
    for i in range(20):
        one = clustered_lift_interval(list(parent[i]), list(child[i]), units, parent_trials=16, child_trials=16)
        assert (one.mean, one.lo, one.hi) == pytest.approx((mean[i], lo[i], hi[i]))
        assert -1.0 <= one.lo <= one.mean <= one.hi <= 1.0


def test_paired_lift_by_unit_names_its_units_and_method() -> None:
    def trial(task: str, contract: str, attempt: int, reward: float) -> TrialRecord:
        return TrialRecord(trial_id=f"{contract}-{task}-{attempt}", run_id="r", task_id=task, task_hash=task,
                           agent="model", contract_hash=contract, attempt=attempt, reward=reward)

    parent, child = PairRef(contract_hash="p"), PairRef(contract_hash="c")
    records = [trial(t, "p", a, 0.0) for t in "wxyz" for a in (0, 1)]
    records += [trial(t, "c", a, 1.0 if t in "wx" else 0.0) for t in "wxyz" for a in (0, 1)]
    units = {"w": "fam-a", "x": "fam-a", "y": "fam-b", "z": "fam-b"}
    report = paired_lift(records, parent, child, set("wxyz"), measured_on=PoolSplit.SEALED, units=units,
                         unit="family")
    assert report.mean == 0.5 and report.n_units == 2 and report.unit == "family" and report.method == METHOD
    summary = report.summary()
    assert (summary["unit"], summary["n_units"], summary["method"]) == ("family", 2, METHOD)
    gate = paired_lift(records, parent, child, set("wxyz"), measured_on=PoolSplit.SELECTION, resamples=200)
    assert gate.method == "percentile bootstrap by task" and gate.n_units == 4  # the gates keep their rule
