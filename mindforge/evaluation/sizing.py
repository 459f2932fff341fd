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


#: the lifts each gate's power is given at when re-sized at the parent's measured rate
RESIZE_LIFTS = (0.10, 0.25)
#: the most attempts a task :func:`resize_gates` considers
MAX_ATTEMPTS = 8


class GateAtRate(BaseModel):
    """One gate's power at the parent's measured rate (:func:`resize_gates`).

    Attributes:
        gate: its name.
        tasks / attempts / baseline_attempts / candidates: the gate as configured.
        power_at: lift (as text, reward units) -> the chance it promotes a pair with that lift.
        min_detectable_lift: the smallest lift it detects with the target power (None:
            none up to a pair passing every trial).
        attempts_for: lift (as text) -> the fewest attempts a task, for both pairs, with
            which it reaches the target power there (None: more than :data:`MAX_ATTEMPTS`).
        why: why no detectable lift is given although the split holds the gate's tasks (a
            gate configured below the fewest paired tasks a decision may rest on,
            :func:`mindforge.evaluation.power.check_gate`); empty otherwise.
    """

    gate: str
    tasks: int
    attempts: int
    baseline_attempts: int
    candidates: int = 1
    power_at: dict[str, float] = Field(default_factory=dict)
    min_detectable_lift: float | None = None
    attempts_for: dict[str, int | None] = Field(default_factory=dict)
    why: str = ""


class GatesAtRate(BaseModel):
    """Each gate of a generation re-sized at its parent's measured selection rate.

    The selection split is drawn once at lineage start, so what can change is the attempts;
    this records what the gates can detect now and the attempts that would reach the target
    power (the lineage runs the attempts it was started with: ``--attempts``, ``--race-budget``).

    Attributes:
        generation: the generation whose gates these are.
        parent_rate: the parent pair's pass rate over its usable selection trials (None:
            it has none yet, as in generation 0).
        parent_trials: those trials.
        target_power: the power asked for.
        gates: one per gate the lineage runs.
        method: ``exact`` (a rate of 0) or ``simulated (<draws> draws, seed <seed>)``.
        note: why there is no figure, when ``parent_rate`` is None.
    """

    generation: int
    parent_rate: float | None = None
    parent_trials: int = 0
    target_power: float = TARGET_POWER
    gates: list[GateAtRate] = Field(default_factory=list)
    method: str = ""
    note: str = ""

    def lines(self) -> list[str]:
        """The record in words: one line for the parent, one per gate."""
        if self.parent_rate is None:
            return [f"gates' power at the parent's measured rate: not computed ({self.note})"]
        out = [
            f"gates' power at the parent's measured selection rate {self.parent_rate:.2f} "
            f"({self.parent_trials} trials; every task at that rate, {self.method}):"
        ]
        for g in self.gates:
            powers = " / ".join(f"{p:.0%} at +{lift}" for lift, p in g.power_at.items())
            mdl = (
                f"{g.min_detectable_lift:.2f}" if g.min_detectable_lift is not None
                else f"nothing ({g.why})" if g.why else "no lift up to 1.0"
            )
            needs = ", ".join(
                f"+{lift}: {n} attempts a task" if n is not None else f"+{lift}: more than {MAX_ATTEMPTS} attempts"
                for lift, n in g.attempts_for.items()
            )
            target = f"{self.target_power:.0%}"
            out.append(
                f"  {g.gate} ({g.attempts} attempt(s) x {g.tasks} tasks, the pair compared with "
                f"{g.baseline_attempts}): power {powers}; detects {mdl} with {target} power; {target} power needs "
                f"{needs}"
            )
        return out


def resize_gates(
    gates: list[GateRule],
    parent_rate: float | None,
    *,
    generation: int,
    parent_trials: int = 0,
    lifts: tuple[float, ...] = RESIZE_LIFTS,
    power: float = TARGET_POWER,
    draws: int = 1000,
    seed: int = 0,
    note: str = "",
) -> GatesAtRate:
    """Each gate's power, detectable lift and the attempts it needs, at the parent's measured rate.

    The power is exact at a rate of 0 and simulated otherwise (:func:`power_at`: every task
    at the parent's rate, independent attempts, the gate's own rule).

    Args:
        gates: the gates as configured (:func:`mindforge.evaluation.power.configured_gates`).
        parent_rate: the parent's per-trial pass rate on selection, in [0, 1] (None: unknown).
        generation: the generation the gates decide in.
        parent_trials: the trials the rate is measured on.
        lifts: the lifts to give the power at.
        power: the target power.
        draws / seed: the simulation's settings.
        note: why there is no rate, when ``parent_rate`` is None.

    Returns:
        the record; without a rate, only the note.
    """
    from mindforge.evaluation.power import GateCannotPassError, min_detectable_lift, simulated_min_detectable_lift

    out = GatesAtRate(generation=generation, parent_rate=parent_rate, parent_trials=parent_trials,
                      target_power=power, note=note)
    if parent_rate is None:
        return out
    rate = min(max(parent_rate, 0.0), 1.0)
    out.method = "exact" if rate <= 0.0 else f"simulated ({draws} draws, seed {seed})"
    for rule in gates:
        top = [lift for lift in lifts if rate + lift <= 1.0]
        row = GateAtRate(
            gate=rule.gate, tasks=rule.tasks, attempts=rule.attempts, baseline_attempts=rule.baseline_attempts,
            candidates=rule.candidates,
            power_at={f"{lift:.2f}": power_at(rule, rate, lift, draws=draws, seed=seed) for lift in top},
        )
        if rule.tasks >= max(1, rule.min_tasks):
            try:
                row.min_detectable_lift = (
                    min_detectable_lift(rule, power) if rate <= 0.0
                    else simulated_min_detectable_lift(rule, rate, power, draws=draws, seed=seed)
                )
            except GateCannotPassError as exc:  # a lineage started with fewer paired tasks than a gate needs
                row.why = str(exc)
        for lift in top:
            row.attempts_for[f"{lift:.2f}"] = next(
                (
                    a for a in range(1, MAX_ATTEMPTS + 1)
                    if power_at(rule.model_copy(update={"attempts": a, "baseline_attempts": a}), rate, lift,
                                draws=draws, seed=seed) >= power
                ),
                None,
            )
        out.gates.append(row)
    return out
