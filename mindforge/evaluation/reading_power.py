"""Power of a sealed reading: how often its 95% interval clears 0, and the attempts that make it likely.

A sealed reading decides nothing, but its lift is the figure a lineage reports, and an
interval that almost surely reaches below 0 reports "too few trials" whatever the gain.
At the main job's size (the sealed-instances reading: 12 training families, 1 instance
each, a root that passes nothing) one attempt a task shows a lift of 0.25 above 0 in about
15% of runs, three attempts in about 83% (``benchmarks/bench_evidence.py --sealed-power``).

:func:`reading_power` simulates the reading with the reported interval itself
(:func:`mindforge.evaluation.intervals.clustered_lift_bounds`, MOVER-Wilson by unit):
``units`` units (families) of ``per`` tasks, a parent passing ``base`` of its trials on
every task, and a lift that varies by unit - each unit gains ``2 * lift`` or nothing with
even odds (clipped at a rate of 1), its tasks together - the world in which a clustered
interval is needed at all. Attempts are independent Bernoulli draws; infrastructure
errors (excluded, not scored) are not modelled and lower the figure.
:func:`sealed_attempts_for_power` picks the fewest attempts a task whose power reaches a
target.

Pure: numpy and pydantic.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from mindforge.evaluation.intervals import clustered_lift_bounds

#: the power a sealed reading is sized for (as the gates: 80%)
TARGET_READING_POWER = 0.8


class ReadingAttempts(BaseModel):
    """The attempts a task a sealed reading is run with, and the power they give.

    Attributes:
        attempts: attempts a task and pair.
        power: share of simulated runs whose 95% lower bound is above 0 at ``lift``.
        lift: the true lift (reward units) the power is for.
        units / per: units (families) and tasks a unit of the reading.
        reached: whether ``power`` reaches the target (False: ``attempts`` is the cap).
    """

    attempts: int
    power: float
    lift: float
    units: int
    per: int
    reached: bool


def reading_power(
    units: int, per: int, attempts: int, lift: float, *, base: float = 0.0, draws: int = 2000, seed: int = 0
) -> float:
    """Share of ``draws`` simulated readings whose 95% lower bound (by unit) is above 0.

    Args:
        units: units of the reading (families; at least 2, or the interval is [-1, 1]).
        per: tasks a unit.
        attempts: attempts a task and pair.
        lift: the expected lift over units (each gains ``2 * lift`` or nothing), in [0, 0.5].
        base: the parent's per-trial pass rate on every task, in [0, 1).
        draws: simulated readings.
        seed: the generator's seed (the same draws for every call with it).

    Returns:
        the power, in [0, 1].

    Raises:
        ValueError: a size below 1, a lift outside [0, 0.5] or a rate outside [0, 1).
    """
    if min(units, per, attempts, draws) < 1:
        raise ValueError(f"units, per, attempts and draws must be at least 1: {units}, {per}, {attempts}, {draws}")
    if not 0.0 <= lift <= 0.5 or not 0.0 <= base < 1.0:
        raise ValueError(f"need a lift in [0, 0.5] and a base rate in [0, 1): lift {lift}, base {base}")
    rng = np.random.default_rng(seed)
    gain = np.repeat(np.where(rng.random((draws, units)) < 0.5, 2 * lift, 0.0), per, axis=1)
    child_rate = np.clip(base + gain, 0.0, 1.0)[:, :, None]
    parent = (rng.random((draws, units * per, attempts)) < base).mean(axis=2)
    child = (rng.random((draws, units * per, attempts)) < child_rate).mean(axis=2)
    trials = units * per * attempts
    unit_of = [u for u in range(units) for _ in range(per)]
    _mean, lo, _hi = clustered_lift_bounds(parent, child, unit_of, parent_trials=trials, child_trials=trials)
    return float((lo > 0).mean())


def sealed_attempts_for_power(
    units: int, per: int = 1, *, lift: float = 0.25, power: float = TARGET_READING_POWER, max_attempts: int = 4,
    draws: int = 2000, seed: int = 0,
) -> ReadingAttempts:
    """The fewest attempts a task (1 to ``max_attempts``) at which the reading clears 0 with ``power`` at ``lift``.

    Args:
        units / per: the reading's units (families) and tasks a unit.
        lift: the lift to detect (reward units; the main job's gates are sized for 0.25).
        power: the target, in (0, 1).
        max_attempts: the cap; when no count reaches the target, the cap is returned with
            ``reached`` False.
        draws / seed: as :func:`reading_power`.

    Raises:
        ValueError: ``power`` outside (0, 1), ``max_attempts`` below 1, or as :func:`reading_power`.
    """
    if not 0.0 < power < 1.0 or max_attempts < 1:
        raise ValueError(f"need a power in (0, 1) and max_attempts >= 1: {power}, {max_attempts}")
    got = 0.0
    for attempts in range(1, max_attempts + 1):
        got = reading_power(units, per, attempts, lift, draws=draws, seed=seed)
        if got >= power:
            return ReadingAttempts(attempts=attempts, power=got, lift=lift, units=units, per=per, reached=True)
    return ReadingAttempts(attempts=max_attempts, power=got, lift=lift, units=units, per=per, reached=False)
