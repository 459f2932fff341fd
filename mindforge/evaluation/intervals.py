"""The interval of a sealed reading's paired lift: units that are families, few of them, near 0 and 1.

A sealed reading measures a population it sampled from - unseen instances of the training
families, families the lineage never sees, hand-written tasks - so the unit of evidence is
what was sampled: a **family** for the instances and families readings (instances of one
family pass and fail together), a task otherwise. The main job's readings hold 12, 2 and
about 10 such units, with scores near 0 and 1, and there the percentile bootstrap over
tasks covers far less than its 95% (``benchmarks/bench_evidence.py``, docs/evidence.md):
it treats a family's instances as independent, and when no task passes under either pair
its interval is ``[0, 0]`` however few the trials. A sign-flip permutation interval over
the units (exact when the differences are symmetric) fails the same way near 0.

:func:`clustered_lift_interval` is the method of variance estimates recovery (MOVER,
Zou & Donner 2008) for a paired difference (Newcombe 1998, "Improved confidence intervals
for the difference between binomial proportions based on paired data", method 10), with
each pair's mean given a Wilson interval (Wilson 1927) on an effective sample size - its
binomial variance over its cluster-robust variance by unit, the design effect of a
cluster sample (Korn & Graubard 1998, "Confidence intervals for proportions with small
expected number of positive counts estimated from survey data"), and Student's t on
``units - 1`` degrees of freedom in place of the normal quantile (their degrees-of-freedom
correction) - and the correlation of the two pairs' unit totals taken at its one-sided
lower confidence limit (Fisher's z), so an uncertain correlation never narrows the
interval. Wilson's interval keeps a mean of 0 from claiming certainty: no pass in 24
trials still bounds the lift at about +0.17. Two units give an interval near ``[-1, 1]``,
which is what two families can say about a population of families.

Pure: numpy and scipy.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from pydantic import BaseModel
from scipy import stats as sps

#: the method's name, as figures print it
METHOD = "MOVER-Wilson by unit"


class PairedInterval(BaseModel):
    """A paired lift with its interval.

    Attributes:
        mean / lo / hi: the mean of ``child - parent`` over the tasks (reward units) and the
            interval's bounds, in [-1, 1].
        units: independent units the interval rests on (families, or tasks).
        confidence: the level.
        method: how the interval was made (:data:`METHOD`).
    """

    mean: float
    lo: float
    hi: float
    units: int
    confidence: float = 0.95
    method: str = METHOD


def wilson_bounds(rate: np.ndarray, n: np.ndarray, q: float) -> tuple[np.ndarray, np.ndarray]:
    """Wilson's score interval of rates on (possibly fractional) sample sizes ``n`` with quantile ``q``; elementwise."""
    rate, n = np.asarray(rate, dtype=float), np.maximum(np.asarray(n, dtype=float), 1e-12)
    centre = (rate + q * q / (2 * n)) / (1 + q * q / n)
    half = q * np.sqrt(np.maximum(rate * (1 - rate), 0.0) / n + q * q / (4 * n * n)) / (1 + q * q / n)
    return np.clip(np.minimum(rate, centre - half), 0.0, 1.0), np.clip(np.maximum(rate, centre + half), 0.0, 1.0)


def _effective_n(totals: np.ndarray, sizes: np.ndarray, rate: np.ndarray, trials: np.ndarray) -> np.ndarray:
    """Each draw's effective sample size: binomial variance over the cluster-robust variance of the mean.

    Shapes: totals (draws, units), sizes (units,), rate and trials (draws,). At a rate of 0
    or 1, or no spread between units (nothing to estimate a design effect from), it is the
    trials; it is kept between the number of units and the trials.
    """
    units = totals.shape[1]
    residual = totals - rate[:, None] * sizes[None, :]
    variance = units / (units - 1) * (residual**2).sum(axis=1) / float(sizes.sum()) ** 2
    binomial = rate * (1 - rate)
    known = (variance > 0.0) & (binomial > 0.0)
    n = np.where(known, binomial / np.where(known, variance, 1.0), trials)
    return np.clip(n, np.minimum(units, trials), trials)


def _correlation_floor(child: np.ndarray, parent: np.ndarray, one_sided_z: float) -> np.ndarray:
    """Per draw, the unit residuals' correlation at its one-sided lower confidence limit (Fisher's z).

    Shapes: (draws, units) each -> (draws,). 0 below 4 units or where a pair's units do not vary.
    """
    units = child.shape[1]
    scale = np.sqrt((child**2).sum(axis=1) * (parent**2).sum(axis=1))
    if units < 4:
        return np.zeros(len(child))
    r = np.clip((child * parent).sum(axis=1) / np.where(scale > 0, scale, 1.0), -0.9999, 0.9999)
    return np.where(scale > 0, np.tanh(np.arctanh(r) - one_sided_z / np.sqrt(units - 3)), 0.0)


def clustered_lift_bounds(
    parent: np.ndarray,
    child: np.ndarray,
    units: Sequence[Hashable],
    *,
    parent_trials: np.ndarray | int,
    child_trials: np.ndarray | int,
    confidence: float = 0.95,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`clustered_lift_interval` for many draws at once (simulations use the reported rule itself).

    Args:
        parent / child: per-task scores, shape (draws, k).
        units: each task's unit, shape (k,).
        parent_trials / child_trials: usable attempts of each pair, shape (draws,) or one number.
        confidence: the level, in (0, 1).

    Returns:
        ``(mean, lo, hi)``, each shape (draws,).
    """
    parent, child = np.atleast_2d(np.asarray(parent, dtype=float)), np.atleast_2d(np.asarray(child, dtype=float))
    names = sorted(set(units), key=repr)
    where = np.array([names.index(u) for u in units])
    onehot = np.zeros((len(where), len(names)))
    onehot[np.arange(len(where)), where] = 1.0
    sizes = onehot.sum(axis=0)
    p_tot, c_tot = parent @ onehot, child @ onehot  # (draws, units)
    p_rate, c_rate = p_tot.sum(axis=1) / sizes.sum(), c_tot.sum(axis=1) / sizes.sum()
    mean = c_rate - p_rate
    if len(names) < 2:
        return mean, np.full_like(mean, -1.0), np.full_like(mean, 1.0)
    draws = len(parent)
    p_trials = np.broadcast_to(np.asarray(parent_trials, dtype=float), (draws,))
    c_trials = np.broadcast_to(np.asarray(child_trials, dtype=float), (draws,))
    q = float(sps.t.ppf(0.5 + confidence / 2, len(names) - 1))
    c_lo, c_hi = wilson_bounds(c_rate, _effective_n(c_tot, sizes, c_rate, c_trials), q)
    p_lo, p_hi = wilson_bounds(p_rate, _effective_n(p_tot, sizes, p_rate, p_trials), q)
    r = _correlation_floor(
        c_tot - c_rate[:, None] * sizes, p_tot - p_rate[:, None] * sizes, float(sps.norm.ppf(confidence))
    )
    below = (c_rate - c_lo) ** 2 + (p_hi - p_rate) ** 2 - 2 * r * (c_rate - c_lo) * (p_hi - p_rate)
    above = (c_hi - c_rate) ** 2 + (p_rate - p_lo) ** 2 - 2 * r * (c_hi - c_rate) * (p_rate - p_lo)
    lo = np.clip(np.minimum(mean - np.sqrt(np.maximum(below, 0.0)), mean), -1.0, 1.0)
    hi = np.clip(np.maximum(mean + np.sqrt(np.maximum(above, 0.0)), mean), -1.0, 1.0)
    return mean, lo, hi


def clustered_lift_interval(
    parent: Sequence[float],
    child: Sequence[float],
    units: Sequence[Hashable],
    *,
    parent_trials: int,
    child_trials: int,
    confidence: float = 0.95,
) -> PairedInterval:
    """The mean paired lift ``child - parent`` over tasks, with its interval by unit (see the module docstring).

    Args:
        parent: per-task scores of the parent (mean reward over its attempts, in [0, 1]), shape (k,).
        child: the child's scores on the same tasks, in the same order, shape (k,).
        units: each task's unit (its family, or the task itself), shape (k,).
        parent_trials / child_trials: each pair's usable attempts on these tasks (the
            effective sample size at a rate of 0 or 1).
        confidence: the level, in (0, 1).

    Returns:
        the interval; one unit gives ``[-1, 1]`` (one family or one task says nothing about
        the others).

    Raises:
        ValueError: empty or unequal-length inputs, or a confidence outside (0, 1).
    """
    if not len(parent) == len(child) == len(units) or not parent:
        raise ValueError(f"need paired, non-empty scores (got {len(parent)}, {len(child)}, {len(units)})")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    mean, lo, hi = clustered_lift_bounds(
        np.asarray([parent]), np.asarray([child]), units, parent_trials=parent_trials, child_trials=child_trials,
        confidence=confidence,
    )
    return PairedInterval(
        mean=float(mean[0]), lo=float(lo[0]), hi=float(hi[0]), units=len(set(units)), confidence=confidence
    )
