"""Interval statistics of evaluations: Wilson intervals of rates, paired bootstrap of lifts.

Pure: numpy and pydantic.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel

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

    Raises:
        ValueError: counts out of range.
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return Interval(successes=0, n=0, rate=0.0, lo=0.0, hi=1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Interval(successes=successes, n=n, rate=p, lo=max(0.0, centre - half), hi=min(1.0, centre + half))


def bootstrap_lift(
    parent: list[float], child: list[float], n: int = 2000, seed: int = 0, confidence: float = 0.95
) -> tuple[float, float, float]:
    """Mean paired lift ``child - parent`` with a percentile bootstrap interval, clustered by task.

    The unit resampled is the task (a cluster of attempts): each task contributes one
    paired difference of per-task scores, and ``n`` resamples draw tasks with
    replacement (numpy ``default_rng(seed).integers(0, k, size=(n, k))``), so attempts of
    one task never count as independent evidence (Efron & Tibshirani 1993, ch. 13; the
    cluster bootstrap).

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
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, len(diffs), size=(n, len(diffs)))].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return float(diffs.mean()), float(lo), float(hi)
