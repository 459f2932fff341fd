"""Sizing the selection split by the gates' power, at lineage start.

Instances of task families are plentiful, so a lineage that draws from families sizes its
selection split to what its gates must detect rather than to a share of a fixed pool:
:func:`size_selection` finds the fewest selection instances per training family such that
every gate (each raced successor candidate against the parent pair, the pair gate's trained
pair against the kept pair: :mod:`mindforge.evaluation.power`) detects a lift of :data:`TARGET_LIFT`
with :data:`~mindforge.evaluation.power.TARGET_POWER` power over a parent passing
``baseline`` of its trials. The power is exact against a parent passing nothing (the root
under its plain harness, the usual start) and simulated otherwise, with the same stated
assumptions (every task at the same pass rate, independent attempts).

Pure: pydantic and numpy (through :mod:`mindforge.evaluation.power`).
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, Field

from mindforge.evaluation.power import TARGET_POWER, GateCannotPassError, GateRule, exact_power, simulated_power

#: the lift (reward units) each gate is sized to detect with TARGET_POWER power
TARGET_LIFT = 0.10
#: the most selection instances per family :func:`size_selection` considers
MAX_PER_FAMILY = 40


class SelectionSize(BaseModel):
    """The selection split a lineage's gates need (:func:`size_selection`).

    Attributes:
        per_family: selection instances per training family.
        tasks: selection tasks in all (instances plus hand-written selection tasks).
        baseline: the parent's per-trial pass rate the gates were sized against.
        lift: the lift they detect with ``target_power``.
        target_power: the power asked for.
        power: gate name -> its power at ``lift`` over ``baseline`` with this size.
        method: ``exact`` (a baseline of 0) or ``simulated (<draws> draws, seed <seed>)``.
    """

    per_family: int
    tasks: int
    baseline: float
    lift: float = TARGET_LIFT
    target_power: float = TARGET_POWER
    power: dict[str, float] = Field(default_factory=dict)
    method: str = "exact"

    def describe(self) -> str:
        """The size and its power in one line."""
        gates = ", ".join(f"{g} {p:.0%}" for g, p in self.power.items())
        parent = "a parent passing nothing" if self.baseline == 0 else f"a parent passing {self.baseline:.0%}"
        return (
            f"selection sized by power: {self.per_family} instance(s) of each training family ({self.tasks} tasks), "
            f"so that each gate has at least {self.target_power:.0%} power to detect a lift of {self.lift:.2f} "
            f"over {parent} (its power there: {gates}; {self.method})"
        )


def power_at(rule: GateRule, baseline: float, lift: float, *, draws: int = 1000, seed: int = 0) -> float:
    """A gate's power at ``lift`` over a parent passing ``baseline``: exact at a baseline of 0, else simulated."""
    if baseline <= 0.0:
        return exact_power(rule, lift)
    return simulated_power(rule, baseline, lift, draws=draws, seed=seed)


def size_selection(
    gates_at: Callable[[int], list[GateRule]],
    *,
    families: int,
    fixed_tasks: int = 0,
    baseline: float = 0.0,
    lift: float = TARGET_LIFT,
    power: float = TARGET_POWER,
    max_per_family: int = MAX_PER_FAMILY,
    draws: int = 1000,
    seed: int = 0,
) -> SelectionSize:
    """The fewest selection instances per family with which every gate reaches ``power`` at ``lift``.

    Bisection over the instances per family (each gate's power grows with its tasks).

    Args:
        gates_at: the gates as configured, given the number of selection tasks.
        families: training families (each gives ``per_family`` instances).
        fixed_tasks: hand-written tasks on the selection split besides the instances.
        baseline: the parent's per-trial pass rate, in [0, 1).
        lift: the lift to detect (reward units).
        power: the power asked for.
        max_per_family: the most instances per family considered.
        draws / seed: the simulation's settings (a baseline above 0).

    Returns:
        the size, with each gate's power at it.

    Raises:
        GateCannotPassError: no size up to ``max_per_family`` reaches the power (names
            ``--selection-instances`` and the numbers).
        ValueError: no training family, or a baseline outside [0, 1).
    """
    if families < 1:
        raise ValueError("sizing the selection split needs at least one training family")
    if not 0.0 <= baseline < 1.0:
        raise ValueError(f"the baseline pass rate must lie in [0, 1), got {baseline}")

    def powers(m: int) -> dict[str, float]:
        return {
            rule.gate: power_at(rule, baseline, lift, draws=draws, seed=seed)
            for rule in gates_at(m * families + fixed_tasks)
        }

    top = powers(max_per_family)
    if not top or min(top.values()) < power:
        worst = min(top.values()) if top else 0.0
        raise GateCannotPassError(
            "--selection-instances",
            f"even {max_per_family} selection instances of each of {families} families give a gate only "
            f"{worst:.0%} power at a lift of {lift:.2f} over a parent passing {baseline:.0%}: raise --attempts",
        )
    lo, hi = 0, max_per_family  # powers(hi) reaches the target, powers(lo) does not (0 tasks: no gate passes)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if min(powers(mid).values()) >= power else (mid, hi)
    return SelectionSize(
        per_family=hi, tasks=hi * families + fixed_tasks, baseline=baseline, lift=lift, target_power=power,
        power=powers(hi), method="exact" if baseline <= 0 else f"simulated ({draws} draws, seed {seed})",
    )
