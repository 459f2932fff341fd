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

:func:`clustered_lift_interval` splits each task's paired difference ``child - parent`` into
its gain and its loss (its positive and negative parts; with one attempt, the two kinds of
discordant pair of the paired 2x2 table, as in Newcombe 1998, "Improved confidence
intervals for the difference between binomial proportions based on paired data"), so the
lift is the mean gain less the mean loss. Each part's mean, a rate in [0, 1], gets a Wilson
interval (Wilson 1927) on an effective sample size - its binomial variance over its
cluster-robust variance by unit, the design effect of a cluster sample (Korn & Graubard
1998, "Confidence intervals for proportions with small expected number of positive counts
estimated from survey data"), with Student's t on ``units - 1`` degrees of freedom in place
of the normal quantile (their degrees-of-freedom correction) - and the two are combined by
the method of variance estimates recovery (MOVER, Zou & Donner 2008) with the parts'
correlation by unit taken at its one-sided lower confidence limit (Fisher's z), so an
uncertain correlation never narrows the interval. Wilson's interval keeps an observed 0
from claiming certainty: no gain and no loss in 24 trials still bounds the lift at about
+-0.17. Two units give an interval near ``[-1, 1]``, which is what two families can say
about a population of families. ``benchmarks/bench_evidence.py`` measures its coverage at
the main job's sizes beside today's bootstrap and a sign-flip permutation interval.

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


def _correlation_floor(first: np.ndarray, second: np.ndarray, one_sided_z: float) -> np.ndarray:
    """Per draw, two parts' unit residuals' correlation at its one-sided lower confidence limit (Fisher's z).

    Shapes: (draws, units) each -> (draws,). 0 below 4 units or where a part's units do not vary.
    """
    units = first.shape[1]
    scale = np.sqrt((first**2).sum(axis=1) * (second**2).sum(axis=1))
    if units < 4:
        return np.zeros(len(first))
    r = np.clip((first * second).sum(axis=1) / np.where(scale > 0, scale, 1.0), -0.9999, 0.9999)
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
        parent_trials / child_trials: usable attempts of each pair, shape (draws,) or one number (the
            fewer is a part's effective sample size where it has no spread to estimate one from).
        confidence: the level, in (0, 1).

    Returns:
        ``(mean, lo, hi)``, each shape (draws,).
    """
    diffs = np.atleast_2d(np.asarray(child, dtype=float)) - np.atleast_2d(np.asarray(parent, dtype=float))
    names = sorted(set(units), key=repr)
    where = np.array([names.index(u) for u in units])
    onehot = np.zeros((len(where), len(names)))
    onehot[np.arange(len(where)), where] = 1.0
    sizes = onehot.sum(axis=0)
    gain_tot, loss_tot = np.maximum(diffs, 0.0) @ onehot, np.maximum(-diffs, 0.0) @ onehot  # (draws, units)
    gain, loss = gain_tot.sum(axis=1) / sizes.sum(), loss_tot.sum(axis=1) / sizes.sum()
    mean = gain - loss
    if len(names) < 2:
        return mean, np.full_like(mean, -1.0), np.full_like(mean, 1.0)
    # a part's effective sample size at a rate of 0: the trials of the pair with fewer
    trials = np.broadcast_to(np.minimum(np.asarray(parent_trials, dtype=float), child_trials), (len(diffs),))
    q = float(sps.t.ppf(0.5 + confidence / 2, len(names) - 1))
    g_lo, g_hi = wilson_bounds(gain, _effective_n(gain_tot, sizes, gain, trials), q)
    l_lo, l_hi = wilson_bounds(loss, _effective_n(loss_tot, sizes, loss, trials), q)
    r = _correlation_floor(
        gain_tot - gain[:, None] * sizes, loss_tot - loss[:, None] * sizes, float(sps.norm.ppf(confidence))
    )
    below = (gain - g_lo) ** 2 + (l_hi - loss) ** 2 - 2 * r * (gain - g_lo) * (l_hi - loss)
    above = (g_hi - gain) ** 2 + (loss - l_lo) ** 2 - 2 * r * (g_hi - gain) * (loss - l_lo)
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
        parent_trials / child_trials: each pair's usable attempts on these tasks (the fewer
            is a part's effective sample size where it has no spread to estimate one from).
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
