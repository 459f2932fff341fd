"""Wilson intervals and the paired, task-clustered bootstrap, against hand computation."""

from __future__ import annotations

import numpy as np
import pytest

from mindforge.evaluation import bootstrap_lift, ols_slope, wilson_interval, within_task_slope


@pytest.mark.parametrize(
    ("successes", "n", "lo", "hi"),
    [(0, 10, 0.0, 0.2775), (5, 10, 0.2366, 0.7634), (10, 10, 0.7225, 1.0), (1, 1, 0.2065, 1.0), (0, 0, 0.0, 1.0)],
)
def test_wilson_intervals_match_published_values(successes, n, lo, hi) -> None:
    interval = wilson_interval(successes, n)
    assert interval.lo == pytest.approx(lo, abs=1e-4) and interval.hi == pytest.approx(hi, abs=1e-4)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_wilson_bounds_hold_their_rate_exactly() -> None:
    """At 0 of n the lower bound is 0 and at n of n the upper bound is 1, not an ulp off (0 of 14, 10 of 10)."""
    assert wilson_interval(0, 14).lo == 0.0 and wilson_interval(0, 12).lo == 0.0
    assert wilson_interval(10, 10).hi == 1.0 and wilson_interval(27, 27).hi == 1.0
    for n in range(1, 301):
        for successes in range(n + 1):
            interval = wilson_interval(successes, n)
            assert 0.0 <= interval.lo <= interval.rate <= interval.hi <= 1.0, (successes, n)


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


def test_within_task_slope_matches_a_hand_computed_panel() -> None:
    """Two tasks drawn at different iterations: pooled OLS sees no trend, the within estimator sees +0.5.

    Task A at iterations 0, 0, 1, 1 scores 0, 1, 1, 1; task B at iterations 1, 1, 2, 2
    scores 0, 0, 0, 1. Centred on each task's means, x is -.5, -.5, .5, .5 in both and y
    is -.75, .25, .25, .25 (A) and -.25, -.25, -.25, .75 (B): sum xy = 1, sum xx = 2, slope
    0.5. Residuals -.5, .5, 0, 0, 0, 0, -.5, .5: sum of squares 1 on 8 - 2 tasks - 1 = 5
    df; standard error sqrt(1 / 5 / 2); t(0.975, 5) = 2.570582.
    """
    points = [("A", 0, 0.0), ("A", 0, 1.0), ("A", 1, 1.0), ("A", 1, 1.0),
              ("B", 1, 0.0), ("B", 1, 0.0), ("B", 2, 0.0), ("B", 2, 1.0)]  # fmt: skip
    got = within_task_slope(points)
    assert got is not None
    half = 2.570582 * (1 / 5 / 2) ** 0.5
    assert got.slope == pytest.approx(0.5)
    assert (got.lo, got.hi) == pytest.approx((0.5 - half, 0.5 + half), abs=1e-5)
    assert (got.n, got.groups, got.df) == (8, 2, 5) and not got.excludes_zero
    # the same points pooled across tasks: the mix of tasks hides the trend
    pooled = ols_slope([(x, y) for _task, x, y in points])
    assert pooled is not None and pooled.slope == pytest.approx(0.0)
    # a task seen at one iteration only carries no within-task information
    assert within_task_slope([*points, ("C", 3, 1.0), ("C", 3, 0.0)]) == got
    assert within_task_slope([("A", 0, 1.0), ("A", 0, 0.0)]) is None


def test_ols_slope_by_hand() -> None:
    """y = 0, 1, 1, 2 at x = 0, 1, 2, 3: slope 0.6, residuals -.1, .3, -.3, .1 (sum of squares .2, 2 df)."""
    got = ols_slope([(0, 0.0), (1, 1.0), (2, 1.0), (3, 2.0)])
    assert got is not None
    half = 4.302653 * (0.2 / 2 / 5) ** 0.5
    assert got.slope == pytest.approx(0.6)
    assert (got.lo, got.hi) == pytest.approx((0.6 - half, 0.6 + half), abs=1e-5)
    assert ols_slope([(0, 0.0), (1, 1.0)]) is None


def test_the_within_task_slope_on_one_task_is_scipys_ols_slope() -> None:
    """The one fit scipy has no counterpart for, checked against linregress where they coincide."""
    from scipy import stats as sps

    rng = np.random.default_rng(3)
    x = rng.integers(0, 6, 30).astype(float)
    y = 0.2 * x + rng.normal(0, 0.5, 30)
    ours = within_task_slope([("t", a, b) for a, b in zip(x, y, strict=True)])
    fit = sps.linregress(x, y)
    half = sps.t.ppf(0.975, 28) * fit.stderr
    assert ours is not None and ours.df == 28
    assert ours.slope == pytest.approx(fit.slope) and ours.lo == pytest.approx(fit.slope - half)


def test_a_lift_over_one_task_has_a_zero_width_interval() -> None:
    assert bootstrap_lift([0.0], [0.5]) == (0.5, 0.5, 0.5)


def test_the_vectorised_lower_bounds_are_bootstrap_lifts() -> None:
    from mindforge.evaluation.stats import bootstrap_lower_bounds

    rng = np.random.default_rng(2)
    for k in (1, 5, 12):
        parent = rng.integers(0, 3, size=(40, k)) / 2
        child = rng.integers(0, 3, size=(40, k)) / 2
        lows = bootstrap_lower_bounds(child - parent, resamples=400, seed=7, confidence=0.975, chunk=7)
        for i in range(40):
            lo = bootstrap_lift(list(parent[i]), list(child[i]), n=400, seed=7, confidence=0.975)[1]
            assert abs(lows[i] - lo) < 1e-12
