"""Power of the selection gates: the smallest lift each gate detects with 80% power.

Both gates (:mod:`mindforge.evaluation.gate`) read per-task scores - the mean reward
over a pair's attempts of a task - paired by task, and pass when the mean paired
difference is above 0 (a tie never passes) and the percentile bootstrap of it (clustered
by task, :func:`mindforge.evaluation.stats.bootstrap_lift`) has its lower bound above
``-margin`` on at least ``min_tasks`` paired tasks; ``margin`` 0 is the superiority rule
(lower bound above 0), a positive margin a declared non-inferiority margin. The interval
is 95%, or ``1 - 0.05 / m`` when the successor race judges ``m`` candidates (Bonferroni).

**Exact case** (a baseline that passes nothing, the usual start: the base model under a
plain harness). Every paired difference is then >= 0 and a bootstrap resample's mean is 0
exactly when it draws only tasks the pair under test failed; with ``z`` of ``k`` tasks
failed that happens with probability ``(z / k) ** k`` (``k`` draws with replacement). In
the bootstrap's limit of infinitely many resamples the lower bound is above 0 exactly when
``(z / k) ** k < (1 - confidence) / 2``, so the rule reduces to "at least ``m*`` of the
``k`` tasks show a pass" (:func:`min_positive_tasks`; 3 of 5 at 95%). With a per-trial
pass rate ``p`` on every task and ``a`` attempts a task shows a pass with probability
``q = 1 - (1 - p) ** a``, and the gate passes with the binomial tail
``P(Binomial(k, q) >= m*)`` (:func:`exact_power`). The expected lift is ``p`` (reward
units), so the minimum detectable lift is the smallest ``p`` whose power reaches the
target (:func:`min_detectable_lift`, Brent's root of the monotone tail). With finitely many
resamples (``lift_resamples``) a case whose ``(z / k) ** k`` lies within Monte Carlo error
of the threshold may go either way.

**Simulated case** (a baseline that passes some trials): no closed form, so
:func:`simulated_power` draws ``draws`` gate runs with a fixed seed (common random
numbers: one uniform array for every lift, so the estimated power is monotone in the
lift) and applies the gate's own rule to each, with ``resamples`` bootstrap resamples.

Assumptions, stated wherever a figure is printed: every task has the same per-trial pass
rate (heterogeneous tasks change the figure), attempts are independent, and the gate sees
the configured tasks and attempts (infrastructure errors, which are excluded, lower it).

Pure: numpy and pydantic.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel
from scipy import optimize
from scipy import stats as sps

from mindforge.evaluation.gate import MIN_GATE_TASKS, TIE_TOLERANCE, bonferroni_confidence
from mindforge.evaluation.stats import bootstrap_lower_bounds

#: power a gate should have at the lift it is said to detect
TARGET_POWER = 0.8


class GateCannotPassError(ValueError):
    """A gate's configuration cannot pass at any lift.

    Args:
        field: the option or spec field to change (e.g. ``--min-split-tasks``).
        reason: why, with the numbers.
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


class GateRule(BaseModel):
    """One gate as configured.

    Attributes:
        gate: its name (``successor``, ``promotion``).
        tasks: tasks on the selection split.
        attempts: attempts per task of the pair under test (each raced candidate, or the
            new adapter's pair).
        baseline_attempts: attempts per task of the pair it is compared with.
        min_tasks: fewest paired tasks the gate decides on.
        margin: non-inferiority margin in reward units (0: the lower bound must be above 0).
        confidence: level of one gate's bootstrap interval (95%).
        candidates: candidates the gate judges at once (the successor race's ``m``); each is
            judged at :attr:`level`.
    """

    gate: str
    tasks: int
    attempts: int
    baseline_attempts: int
    min_tasks: int
    margin: float = 0.0
    confidence: float = 0.95
    candidates: int = 1

    @property
    def level(self) -> float:
        """The interval level each candidate is judged at: ``1 - (1 - confidence) / candidates`` (Bonferroni)."""
        return bonferroni_confidence(self.candidates, self.confidence)


class GatePower(BaseModel):
    """What a gate can detect (:func:`gate_power`).

    Attributes:
        rule: the gate.
        min_positive_tasks: tasks that must show a pass against a baseline passing nothing.
        min_detectable_lift: smallest lift (reward units, = the per-trial pass rate
            against a baseline passing nothing) with :data:`TARGET_POWER` power; exact.
        power_at: per-trial pass rate (as text) -> exact power against that baseline.
        baseline_rate / simulated_min_detectable_lift: a baseline passing that share of
            trials, and the smallest lift over it with :data:`TARGET_POWER` power
            (simulated; None when even a pair passing every trial falls short).
        draws / seed: the simulation's settings.
    """

    rule: GateRule
    min_positive_tasks: int
    min_detectable_lift: float
    power_at: dict[str, float]
    baseline_rate: float | None = None
    simulated_min_detectable_lift: float | None = None
    draws: int = 0
    seed: int = 0

    def describe(self) -> str:
        """The gate's rule and power in words (one line)."""
        r = self.rule
        level = f"{r.level:.1%}" + (f" (Bonferroni over {r.candidates} candidates)" if r.candidates > 1 else "")
        bound = "0" if r.margin == 0 else f"-{r.margin:g} (non-inferiority)"
        rule = f"mean above 0 and {level} lower bound above {bound}"
        text = (
            f"{r.gate} gate: {r.attempts} attempt(s) on each of {r.tasks} selection tasks "
            f"(the pair it is compared with: {r.baseline_attempts} attempt(s) each),"
            f" paired bootstrap {rule}, at least {r.min_tasks} paired tasks; against a baseline passing nothing it "
            f"needs a pass on {self.min_positive_tasks} of {r.tasks} tasks; the smallest lift it detects with "
            f"{TARGET_POWER:.0%} power is {self.min_detectable_lift:.2f} (exact binomial)"
        )
        if self.baseline_rate is not None:
            over = (
                f"{self.simulated_min_detectable_lift:.2f}" if self.simulated_min_detectable_lift is not None
                else "no lift up to 1.0"
            )
            text += (
                f"; over a baseline passing {self.baseline_rate:.0%}: {over} "
                f"(simulated, {self.draws} draws, seed {self.seed})"
            )
        return text


def min_positive_tasks(tasks: int, margin: float = 0.0, confidence: float = 0.95) -> int:
    """Tasks that must show a pass for the gate to pass against a baseline that passes nothing.

    Args:
        tasks: paired tasks ``k`` (>= 1).
        margin: non-inferiority margin (> 0: any pass is enough, since the lower bound is
            then >= 0; the all-zero comparison is refused).
        confidence: interval level.

    Returns:
        the smallest ``m`` with ``((k - m) / k) ** k < (1 - confidence) / 2`` (always <= k).

    Raises:
        ValueError: ``tasks`` < 1.
    """
    if tasks < 1:
        raise ValueError(f"need at least one task, got {tasks}")
    if margin > 0:
        return 1
    tail = (1 - confidence) / 2
    return next(m for m in range(1, tasks + 1) if ((tasks - m) / tasks) ** tasks < tail)


def binomial_tail(n: int, q: float, m: int) -> float:
    """``P(Binomial(n, q) >= m)`` (``scipy.stats.binom.sf``)."""
    return float(sps.binom.sf(max(m, 0) - 1, n, q))


def exact_power(rule: GateRule, rate: float) -> float:
    """Chance the gate passes a pair with per-trial pass rate ``rate`` over a baseline passing nothing.

    Args:
        rule: the gate.
        rate: the pair's per-trial pass rate on every task, in [0, 1].

    Returns:
        power in [0, 1] (0 when the split holds fewer than ``min_tasks`` tasks).
    """
    if rule.tasks < max(1, rule.min_tasks):
        return 0.0
    q = 1 - (1 - rate) ** rule.attempts
    return binomial_tail(rule.tasks, q, min_positive_tasks(rule.tasks, rule.margin, rule.level))


def min_detectable_lift(rule: GateRule, power: float = TARGET_POWER) -> float:
    """Smallest per-trial pass rate (= lift over a baseline passing nothing) the gate passes with ``power``.

    Raises:
        GateCannotPassError: the gate cannot pass at any lift (see :func:`check_gate`).
    """
    check_gate(rule)
    if exact_power(rule, 1.0) < power:
        return 1.0
    # the power rises with the rate: one root in (0, 1], found by Brent's method
    return float(optimize.brentq(lambda rate: exact_power(rule, rate) - power, 0.0, 1.0, xtol=1e-12))


def check_gate(rule: GateRule, field: str = "--min-split-tasks") -> None:
    """Refuse a gate that cannot pass at any lift, or that would decide on fewer than 5 paired tasks.

    Raises:
        GateCannotPassError: the selection split holds no task; the gate would decide on
            fewer than :data:`~mindforge.evaluation.gate.MIN_GATE_TASKS` paired tasks (a
            one-task decision has a zero-width interval); or the split holds fewer than the
            ``min_tasks`` paired tasks the gate decides on (named in ``field``).
    """
    if rule.tasks < 1:
        raise GateCannotPassError(
            "--selection", f"the {rule.gate} gate decides on the selection split, which holds 0 tasks"
        )
    if rule.min_tasks < MIN_GATE_TASKS:
        raise GateCannotPassError(
            field,
            f"the {rule.gate} gate would decide on as few as {rule.min_tasks} paired selection task(s); a gate needs "
            f"at least {MIN_GATE_TASKS} (fewer give an interval too narrow to mean anything: one task gives a "
            f"zero-width one): set {field} to {MIN_GATE_TASKS} or more",
        )
    if rule.min_tasks > rule.tasks:
        raise GateCannotPassError(
            field,
            f"the {rule.gate} gate needs at least {rule.min_tasks} paired selection tasks but the selection split "
            f"holds {rule.tasks}: it could never pass; lower {field} to {rule.tasks} or give the split more tasks",
        )


def gate_passes(parent: np.ndarray, child: np.ndarray, rule: GateRule, *, resamples: int = 500,
                gate_seed: int = 0) -> np.ndarray:
    """The gate's rule on simulated runs: per-task scores, shape (draws, k) each -> passed, shape (draws,).

    The rule of :func:`mindforge.evaluation.gate.judge_lift` (mean above 0, lower bound at
    ``rule.level`` above ``-margin``, at least ``min_tasks`` tasks), with the gate's own
    resample indices for ``gate_seed`` (:func:`mindforge.evaluation.stats.bootstrap_lower_bounds`).
    """
    diffs = np.asarray(child, dtype=float) - np.asarray(parent, dtype=float)
    lows = bootstrap_lower_bounds(diffs, resamples=resamples, seed=gate_seed, confidence=rule.level)
    means = diffs.mean(axis=1)
    return (means > TIE_TOLERANCE) & (lows > -rule.margin + TIE_TOLERANCE) & (rule.tasks >= rule.min_tasks)


def simulated_power(
    rule: GateRule, baseline: float, lift: float, *, draws: int = 1000, resamples: int = 500, seed: int = 0
) -> float:
    """Chance the gate passes a pair whose per-trial pass rate is ``baseline + lift`` (simulated).

    Each draw runs the baseline (``baseline_attempts``) and the pair (``attempts``) on
    ``tasks`` tasks from one fixed uniform array (seed ``seed``) and applies the gate's
    rule with ``resamples`` bootstrap resamples (Efron & Tibshirani 1993, ch. 13).

    Args:
        rule: the gate.
        baseline: the baseline's per-trial pass rate, in [0, 1].
        lift: added to it (clipped to [0, 1]).
        draws / resamples / seed: simulation settings.

    Returns:
        the share of draws in which the gate passed.
    """
    if rule.tasks < 1:
        return 0.0
    rng = np.random.default_rng(seed)
    u_base = rng.random((draws, rule.tasks, rule.baseline_attempts))
    u_pair = rng.random((draws, rule.tasks, rule.attempts))
    rate = min(1.0, max(0.0, baseline + lift))
    parent = (u_base < baseline).mean(axis=2)
    child = (u_pair < rate).mean(axis=2)
    return float(gate_passes(parent, child, rule, resamples=resamples, gate_seed=seed).mean())


def simulated_min_detectable_lift(
    rule: GateRule, baseline: float, power: float = TARGET_POWER, *, draws: int = 1000, seed: int = 0
) -> float | None:
    """Smallest lift over a baseline passing ``baseline`` of its trials that the gate passes with ``power``.

    Bisection on :func:`simulated_power` (monotone in the lift for a fixed seed), to 0.005.

    Returns:
        the lift in reward units, or None when a pair passing every trial falls short.
    """
    check_gate(rule)
    if simulated_power(rule, baseline, 1.0 - baseline, draws=draws, seed=seed) < power:
        return None
    lo, hi = -baseline if rule.margin > 0 else 0.0, 1.0 - baseline
    while hi - lo > 0.005:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if simulated_power(rule, baseline, mid, draws=draws, seed=seed) >= power else (mid, hi)
    return hi


def gate_power(rule: GateRule, baseline_rate: float | None = 0.25, *, draws: int = 1000, seed: int = 0) -> GatePower:
    """A gate's power: exact against a baseline passing nothing, simulated over ``baseline_rate``.

    Raises:
        GateCannotPassError: the gate cannot pass at any lift.
    """
    mdl = min_detectable_lift(rule)
    out = GatePower(
        rule=rule,
        min_positive_tasks=min_positive_tasks(rule.tasks, rule.margin, rule.level),
        min_detectable_lift=mdl,
        power_at={f"{p:.2f}": exact_power(rule, p) for p in (0.1, 0.25, 0.5)},
    )
    if baseline_rate is not None:
        out.baseline_rate, out.draws, out.seed = baseline_rate, draws, seed
        out.simulated_min_detectable_lift = simulated_min_detectable_lift(rule, baseline_rate, draws=draws, seed=seed)
    return out


def configured_gates(
    selection_tasks: int,
    *,
    successor: bool,
    promotion: bool,
    attempts: int,
    min_tasks: int,
    candidates: int,
    race_budget: int,
    margin: float,
) -> list[GateRule]:
    """The gates a lineage runs, as configured (what ``lineage start`` prints and checks).

    Args:
        selection_tasks: tasks on the selection split.
        successor: the successor gate runs (Expansion with configuration search).
        promotion: the promotion gate runs (Update).
        attempts: ``evaluation.attempts`` (the parent's, and the new adapter's pair's).
        min_tasks: ``evaluation.splits.min_tasks``.
        candidates / race_budget: ``evaluation.successor_candidates`` / ``race_budget``;
            each raced candidate runs :func:`mindforge.evaluation.race.candidate_attempts`
            attempts a task and is judged at the Bonferroni level over ``candidates``.
        margin: ``update.promotion_margin``.
    """
    from mindforge.evaluation.race import candidate_attempts

    gates = []
    if successor:
        gates.append(GateRule(
            gate="successor", tasks=selection_tasks, attempts=candidate_attempts(candidates, race_budget),
            baseline_attempts=attempts, min_tasks=min_tasks, candidates=candidates,
        ))
    if promotion:
        gates.append(GateRule(
            gate="promotion", tasks=selection_tasks, attempts=attempts, baseline_attempts=attempts,
            min_tasks=min_tasks, margin=margin,
        ))
    return gates
