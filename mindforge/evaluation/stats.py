"""Interval statistics of evaluations: Wilson intervals of rates, paired bootstrap of lifts, trend slopes.

Pure: numpy, scipy and pydantic. scipy does the statistics where it has them (the
Wilson interval, ``binomtest``; the percentile bootstrap, ``bootstrap``; the OLS slope,
``linregress``); the within-task slope (task fixed effects) has no scipy counterpart and
is fitted here (a test checks it against ``linregress`` on one task).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np
from pydantic import BaseModel
from scipy import stats as sps

#: z of a two-sided 95% interval
Z95 = 1.959963984540054


class Interval(BaseModel):
    """A success rate with its Wilson score interval.

    Attributes:
        successes / n: counts (n = attempts with a real reward).
        rate: successes / n (0.0 when n is 0).
        lo / hi: interval bounds in [0, 1] ((0, 1) when n is 0).
    """

    successes: int
    n: int
    rate: float
    lo: float
    hi: float


def wilson_interval(successes: int, n: int, z: float = Z95) -> Interval:
    """Wilson score interval of a binomial rate (Wilson 1927), good at small n and at 0 or n.

    Args:
        successes: successes, 0..n.
        n: trials.
        z: normal quantile (1.96 for 95%).

    Returns:
        the rate with bounds that hold it: ``lo <= rate <= hi``, exactly. The Wilson
        interval always contains ``successes / n``, and at 0 successes its lower bound is
        0 (at n, its upper bound 1); computed as ``centre - half`` in floating point
        those bounds can land an ulp on the wrong side of the rate (1.4e-17 above 0 at
        0 of 14), so the bounds are held to the rate - a rounding correction only.

    Raises:
        ValueError: counts out of range.
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return Interval(successes=0, n=0, rate=0.0, lo=0.0, hi=1.0)
    p = successes / n
    level = 1 - 2 * float(sps.norm.sf(z))
    ci = sps.binomtest(successes, n).proportion_ci(confidence_level=level, method="wilson")
    lo, hi = max(0.0, min(p, float(ci.low))), min(1.0, max(p, float(ci.high)))
    return Interval(successes=successes, n=n, rate=p, lo=lo, hi=hi)


def bootstrap_lift(
    parent: list[float], child: list[float], n: int = 2000, seed: int = 0, confidence: float = 0.95
) -> tuple[float, float, float]:
    """Mean paired lift ``child - parent`` with a percentile bootstrap interval, clustered by task.

    The unit resampled is the task (a cluster of attempts): each task contributes one
    paired difference of per-task scores, and ``n`` resamples draw tasks with
    replacement (``scipy.stats.bootstrap``, percentile method, ``rng=default_rng(seed)``),
    so attempts of one task never count as independent evidence (Efron & Tibshirani
    1993, ch. 13; the cluster bootstrap). One task gives a zero-width interval.

    Args:
        parent: per-task scores of the parent, shape (k,) (e.g. mean reward per task).
        child: the child's scores on the same tasks, in the same order, shape (k,).
        n: bootstrap resamples.
        seed: RNG seed.
        confidence: interval level in (0, 1).

    Returns:
        ``(mean lift, lower bound, upper bound)`` in reward units.

    Raises:
        ValueError: empty or unequal-length lists, n < 1, or a confidence outside (0, 1).
    """
    if len(parent) != len(child) or not parent:
        raise ValueError(f"need paired, non-empty scores (got {len(parent)} and {len(child)})")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    diffs = np.asarray(child, dtype=float) - np.asarray(parent, dtype=float)
    mean = float(diffs.mean())
    if len(diffs) == 1:
        return mean, mean, mean
    res = sps.bootstrap(
        (diffs,), np.mean, n_resamples=n, confidence_level=confidence, method="percentile",
        rng=np.random.default_rng(seed),
    )
    return mean, float(res.confidence_interval.low), float(res.confidence_interval.high)


def bootstrap_lower_bounds(
    diffs: np.ndarray, *, resamples: int = 2000, seed: int = 0, confidence: float = 0.95, chunk: int = 100
) -> np.ndarray:
    """:func:`bootstrap_lift`'s lower bound for many sets of paired differences at once (simulations).

    The same resample indices as :func:`bootstrap_lift` with the same ``seed`` (one
    ``default_rng(seed).integers(0, k, (resamples, k))`` draw, as ``scipy.stats.bootstrap``
    draws them) and the same linear percentile, so a simulated gate applies the gate's own
    rule; the two agree to floating-point rounding (``tests/unit/evaluation/test_eval_stats.py``).

    Args:
        diffs: paired differences ``child - parent``, shape (draws, k), k >= 1.
        resamples / seed / confidence: as :func:`bootstrap_lift`.
        chunk: draws per step (memory: chunk x resamples x k floats).

    Returns:
        lower bounds, shape (draws,).
    """
    diffs = np.asarray(diffs, dtype=float)
    k = diffs.shape[1]
    index = np.random.default_rng(seed).integers(0, k, size=(resamples, k))
    tail = (1 - confidence) / 2
    out = np.empty(len(diffs))
    for start in range(0, len(diffs), chunk):
        means = diffs[start : start + chunk][:, index].mean(axis=2)  # (chunk, resamples)
        out[start : start + chunk] = np.quantile(means, tail, axis=1)
    return out


class Slope(BaseModel):
    """A fitted slope with its 95% interval.

    Attributes:
        slope: change in the outcome per unit of x (e.g. reward per iteration).
        lo / hi: the interval's bounds (Student's t, ``df`` degrees of freedom).
        n: points used.
        groups: groups used (tasks, for :func:`within_task_slope`; 1 for :func:`ols_slope`).
        df: residual degrees of freedom.
    """

    slope: float
    lo: float
    hi: float
    n: int
    groups: int
    df: int

    @property
    def excludes_zero(self) -> bool:
        """True when the whole interval lies on one side of 0."""
        return self.lo > 0.0 or self.hi < 0.0


def _slope(x: np.ndarray, y: np.ndarray, df: int, groups: int, confidence: float) -> Slope | None:
    """Least-squares slope through the origin of centred ``x``, ``y``, with a t interval on ``df``."""
    sxx = float((x * x).sum())
    if df < 1 or sxx <= 0.0:
        return None
    b = float((x * y).sum()) / sxx
    residual = float(((y - b * x) ** 2).sum())
    half = float(sps.t.ppf(0.5 + confidence / 2, df)) * math.sqrt(residual / df / sxx)
    return Slope(slope=b, lo=b - half, hi=b + half, n=len(x), groups=groups, df=df)


def ols_slope(points: Sequence[tuple[float, float]], confidence: float = 0.95) -> Slope | None:
    """Ordinary least-squares slope of y on x with its t interval (``n - 2`` degrees of freedom).

    Args:
        points: ``(x, y)`` pairs, e.g. (iteration, mean reward of the iteration).
        confidence: interval level in (0, 1).

    Returns:
        the slope, or None with fewer than 3 points or no spread in x.
    """
    if len(points) < 3:
        return None
    xy = np.asarray(points, dtype=float)
    if float(np.ptp(xy[:, 0])) == 0.0:
        return None
    fit = sps.linregress(xy[:, 0], xy[:, 1])
    df = len(points) - 2
    half = float(sps.t.ppf(0.5 + confidence / 2, df)) * float(fit.stderr)
    slope = float(fit.slope)
    return Slope(slope=slope, lo=slope - half, hi=slope + half, n=len(points), groups=1, df=df)


def within_task_slope(points: Sequence[tuple[Hashable, float, float]], confidence: float = 0.95) -> Slope | None:
    """Slope of y on x within tasks (task fixed effects), with its t interval.

    The *within* (fixed-effects) estimator of panel data (Wooldridge, "Econometric
    Analysis of Cross Section and Panel Data", 2010, ch. 10.5): x and y are centred on
    each task's own means before one common slope is fitted, so a task's level (an easy
    task passes often whenever it is drawn) drops out and only change within a task counts.
    For a training-reward curve this removes the curriculum's confound: the tasks drawn
    change from one iteration to the next, so a mean over each iteration's rollouts moves
    with the mix of tasks as much as with the policy. Rollouts are independent draws
    given the task and the iteration's adapter; the interval is OLS's, on
    ``n - tasks - 1`` degrees of freedom (one mean per task and the slope).

    Args:
        points: ``(task, x, y)`` per observation, e.g. (task hash, iteration, reward) per rollout.
        confidence: interval level in (0, 1).

    Returns:
        the slope over the tasks seen at two or more distinct x (the others carry no
        within-task information and are left out), or None when no slope can be fitted
        (no such task, or no residual degree of freedom).
    """
    by_task: dict[Hashable, list[tuple[float, float]]] = {}
    for task, px, py in points:
        by_task.setdefault(task, []).append((float(px), float(py)))
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    for obs in by_task.values():
        arr = np.asarray(obs, dtype=float)
        if len(set(arr[:, 0].tolist())) < 2:
            continue
        xs.append(arr[:, 0] - arr[:, 0].mean())
        ys.append(arr[:, 1] - arr[:, 1].mean())
    if not xs:
        return None
    x, y = np.concatenate(xs), np.concatenate(ys)
    return _slope(x, y, len(x) - len(xs) - 1, len(xs), confidence)
