"""Wilson intervals and the paired, task-clustered bootstrap, against hand computation."""

from __future__ import annotations

import numpy as np
import pytest

from mindforge.evaluation import bootstrap_lift, wilson_interval


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
    with pytest.raises(ValueError):
        bootstrap_lift([0, 1], [1])
    with pytest.raises(ValueError):
        bootstrap_lift([], [])
    with pytest.raises(ValueError):
        bootstrap_lift([0], [1], confidence=1.0)


def test_paired_interval_matches_a_hand_computed_bootstrap_on_a_fixed_table() -> None:
    """Six tasks, per-task scores of two pairs; the interval is recomputed by hand, seeded."""
    parent = [0.0, 0.5, 1.0, 0.0, 0.5, 0.0]
    child = [1.0, 0.5, 1.0, 0.5, 1.0, 0.0]
    diffs = np.array(child) - np.array(parent)  # 1, 0, 0, .5, .5, 0
    rng = np.random.default_rng(11)
    resampled = np.array([diffs[rng.integers(0, 6, size=6)].mean() for _ in range(500)])
    want = (diffs.mean(), np.percentile(resampled, 2.5), np.percentile(resampled, 97.5))
    got = bootstrap_lift(parent, child, n=500, seed=11)
    assert got[0] == pytest.approx(1 / 3)
    assert got == pytest.approx(want)
