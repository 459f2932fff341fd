"""Benchmark: the sealed readings' intervals and the selection gates on simulated trials (no model).

**The sealed readings' intervals: coverage.** At the main job's sizes - sealed instances:
12 training families x 1 instance; sealed families: 2 held-out families x 3 instances;
sealed tasks: the 12 pinned hand-written tasks less the 4 the library restates (8), and
the 4 restated tasks - with 1 and 2 attempts a task, parents passing 0, 0.25 or 0.5 and
lifts of 0, 0.10 and 0.25 that **vary by family** (each family gains twice the lift or
nothing; tasks of one family share their family's parent rate and gain; in the hand-written
readings every task is its own unit), in the even world (every family at the parent's rate)
and the uneven one (each family's rate from Beta(p/2, (1-p)/2)). The true lift is the
expected lift over the world's families (exact: the clipped two-point gain averaged over
the Beta). Coverage is the share of 2000 draws whose 95% interval holds it, for today's
interval (the percentile bootstrap by task, 2000 resamples, seed 0), the sign-flip
permutation interval by unit (Fisher's randomization test inverted; exact when the unit
differences are symmetric) and the new one (MOVER-Wilson by unit:
:func:`mindforge.evaluation.intervals.clustered_lift_bounds`, the reported rule itself).
Target: at least 93% in every cell.

**The sealed-instances reading's power** (``--sealed-power``): at the main job's size and a
parent passing nothing, the share of draws whose 95% lower bound is above 0, by lift and
attempts a task - what a target of "a sealed lift with its lower bound above 0" can ask of
one run.

Every figure is simulated: per-trial Bernoulli outcomes, attempts independent, no
infrastructure errors, in two worlds: **even** - every task at the parent's pass rate (the
power model's assumption, :mod:`mindforge.evaluation.power`) - and **uneven** - each task's
rate drawn from Beta(p/2, (1-p)/2) (mean p; most tasks pass nearly always or nearly never,
as real tasks do, so identical scores - ties - are common), a pair's lift added to every
task's rate (clipped at 1). Each gate is applied with its own rule and
its own resample indices (2000 resamples, seed 0, as ``evaluation.lift_resamples`` and
``evaluation.seed`` default): the new rule through
:func:`mindforge.evaluation.power.gate_passes` (checked equal to
:func:`mindforge.evaluation.gate.judge_lift` in ``tests/unit/evaluation/test_eval_power.py``),
today's rule (the tip of main before this change) written out here beside it:

- **successor, 1 candidate** (the main job: ``--race 1 --race-budget 2``): the candidate
  runs 2 attempts a task, the parent 2. Today: promote when the 95% lower bound is above 0
  and not both all 0. New: a mean above 0 as well (a tie never passes).
- **successor, 2 candidates** (``--race 2`` at the same budget: 1 attempt each). Today:
  successive halving keeps the better mean (the search's first on a tie) and tests only it
  at 95%: a best-of-2 with no correction. New: each judged at 97.5% (Bonferroni), the
  better qualifying one promoted.
- **pair gate** (2 attempts a task for each pair). Today: the trained pair against the
  *parent* pair (lower bound above ``-margin``, not both all 0) and, when the successor
  check promoted a new harness, a mean at least the harness's. New: the trained pair
  against the *kept* pair (the new harness with the parent's adapter) by the interval rule
  with a mean above 0. Shown without a margin (the default) and with a declared
  non-inferiority margin of 0.05.

A false promotion is a promotion when nothing gained (ties included): for the successor,
every candidate at the parent's rate; for the pair gate, an adapter that changes nothing,
with the harness unchanged and with a harness that gained 0.25 (where, before this rule, the
harness's lift carried the adapter). Power is the chance of a promotion at a lift of 0.10 or
0.25 over a parent passing 0, 0.25 or 0.5 of its trials (for two candidates: one has the
lift, the other none; for the pair gate: the adapter's own lift, the harness unchanged).
Sizes: the main job's 12 selection tasks, and 24 and 36 tasks (2x and 3x the trials, at the
same attempts).

The race: mean trials of the successor race (``mindforge.evaluation.race.plan_race``, run
look by look on simulated outcomes) with the early stop and without (the full race), and
the share of races whose early stop decided as the full race would (it must be 100%).

Run (a few minutes on 2 cores)::

    .venv/bin/python benchmarks/bench_evidence.py                # 2000 draws a cell, 100 races a case
    .venv/bin/python benchmarks/bench_evidence.py --quick        # 400 draws, 20 races: a smoke run
    .venv/bin/python benchmarks/bench_evidence.py --coverage     # the intervals' coverage only
    .venv/bin/python benchmarks/bench_evidence.py --sealed-power # the sealed-instances reading's power only
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scipy import special  # noqa: E402 - as above

from mindforge.evaluation.gate import TIE_TOLERANCE  # noqa: E402 - after the sys.path insert above
from mindforge.evaluation.intervals import clustered_lift_bounds  # noqa: E402 - as above
from mindforge.evaluation.power import GateRule, gate_passes  # noqa: E402 - as above
from mindforge.evaluation.stats import bootstrap_lower_bounds  # noqa: E402 - as above

#: selection tasks: the main job's, then 2x and 3x the trials
SIZES = (("main job", 12), ("2x", 24), ("3x", 36))
#: the parent's per-trial pass rates
BASELINES = (0.0, 0.25, 0.5)
#: the lifts power is given at
LIFTS = (0.10, 0.25)
#: the gates' bootstrap, as the lineage spec's defaults
RESAMPLES, GATE_SEED = 2000, 0
#: the harness's lift in the pair gate's "harness gained" world
HARNESS_GAIN = 0.25

Scores = np.ndarray  # per-task mean reward, shape (draws, tasks)


def even(rng: np.random.Generator, draws: int, tasks: int, base: float) -> np.ndarray:
    """Every task at the parent's rate: shape (draws, tasks)."""
    return np.full((draws, tasks), base)


def uneven(rng: np.random.Generator, draws: int, tasks: int, base: float) -> np.ndarray:
    """Each task's parent rate from Beta(p/2, (1-p)/2) (mean p, mostly near 0 or 1): shape (draws, tasks)."""
    if base <= 0.0 or base >= 1.0:
        return np.full((draws, tasks), base)
    return rng.beta(0.5 * base, 0.5 * (1 - base), size=(draws, tasks))


#: the worlds: how the parent's per-task pass rates are drawn
WORLDS: dict[str, Callable] = {"even": even, "uneven": uneven}


def scores(rng: np.random.Generator, rates: np.ndarray, attempts: int, lift: float = 0.0) -> Scores:
    """Per-task scores of a pair passing ``rates + lift`` (clipped) of its trials: the mean of ``attempts`` draws."""
    rate = np.clip(rates + lift, 0.0, 1.0)[:, :, None]
    return (rng.random((*rates.shape, attempts)) < rate).mean(axis=2)


def today_passes(parent: Scores, child: Scores, margin: float = 0.0) -> np.ndarray:
    """Today's interval rule: the 95% lower bound above ``-margin``, and not both pairs all 0."""
    lows = bootstrap_lower_bounds(child - parent, resamples=RESAMPLES, seed=GATE_SEED, confidence=0.95)
    all_zero = (parent == 0).all(axis=1) & (child == 0).all(axis=1)
    return (lows > -margin) & ~all_zero


def new_rule(tasks: int, attempts: int, candidates: int = 1, margin: float = 0.0) -> GateRule:
    """The new gate as configured (min_tasks 5)."""
    return GateRule(gate="g", tasks=tasks, attempts=attempts, baseline_attempts=2, min_tasks=5, margin=margin,
                    candidates=candidates)


def new_passes(parent: Scores, child: Scores, rule: GateRule) -> np.ndarray:
    """The new rule (:func:`mindforge.evaluation.power.gate_passes`) with the gate's resamples and seed."""
    return gate_passes(parent, child, rule, resamples=RESAMPLES, gate_seed=GATE_SEED)


# ------------------------------------------------------------------ the gates: (today, new) promotion rates
def successor_one(rng, rates, lift) -> tuple[float, float]:
    tasks = rates.shape[1]
    parent, cand = scores(rng, rates, 2), scores(rng, rates, 2, lift)
    return float(today_passes(parent, cand).mean()), float(new_passes(parent, cand, new_rule(tasks, 2)).mean())


def successor_two(rng, rates, lift) -> tuple[float, float]:
    tasks = rates.shape[1]
    parent = scores(rng, rates, 2)
    first, second = scores(rng, rates, 1, lift), scores(rng, rates, 1)
    # today: successive halving keeps the better mean (the first on a tie) and tests it alone at 95%
    finalist = np.where((second.mean(axis=1) > first.mean(axis=1))[:, None], second, first)
    today = today_passes(parent, finalist)
    rule = new_rule(tasks, 1, candidates=2)
    new = new_passes(parent, first, rule) | new_passes(parent, second, rule)
    return float(today.mean()), float(new.mean())


def pair_gate(margin: float, harness_gain: float) -> Callable:
    """The pair gate in a world where the harness gained ``harness_gain`` and the adapter adds ``lift``."""

    def run(rng, rates, lift) -> tuple[float, float]:
        tasks = rates.shape[1]
        parent = scores(rng, rates, 2)
        kept = scores(rng, rates, 2, harness_gain) if harness_gain else parent
        trained = scores(rng, rates, 2, harness_gain + lift)
        today = today_passes(parent, trained, margin)
        if harness_gain:  # today's second check: a mean at least the new harness's (ties pass)
            today &= trained.mean(axis=1) >= kept.mean(axis=1) - TIE_TOLERANCE
        new = new_passes(kept, trained, new_rule(tasks, 2, margin=margin))
        return float(today.mean()), float(new.mean())

    return run


GATES: dict[str, Callable] = {
    "successor, 1 candidate (2 attempts)": successor_one,
    "successor, 2 candidates (1 attempt each)": successor_two,
    "pair gate (2 attempts)": pair_gate(0.0, 0.0),
    "pair gate, margin 0.05": pair_gate(0.05, 0.0),
}
#: worlds in which only false promotions are shown (no power: the harness's gain is not the adapter's)
FALSE_ONLY: dict[str, Callable] = {
    f"pair gate, harness gained {HARNESS_GAIN}, adapter nothing": pair_gate(0.0, HARNESS_GAIN),
}


def gate_table(draws: int, seed: int) -> list[str]:
    """One block per gate, world and size: false promotions, then power at each lift, per parent rate; today|new."""
    lines = [
        f"gates: share of {draws} simulated decisions that promote (today|new), parent passing "
        + " / ".join(f"{b:.2f}" for b in BASELINES) + "; 'no gain' is the false-promotion rate (target <= 5%)",
    ]
    for name, gate in {**GATES, **FALSE_ONLY}.items():
        lines.append(f"\n{name}")
        for world, draw_rates in WORLDS.items():
            for label, tasks in SIZES:
                rng = np.random.default_rng(seed)
                rates = {b: draw_rates(rng, draws, tasks, b) for b in BASELINES}
                cells = {"no gain": [gate(rng, rates[b], 0.0) for b in BASELINES]}
                if name in GATES:
                    for lift in LIFTS:
                        cells[f"+{lift:.2f}"] = [gate(rng, rates[b], lift) for b in BASELINES]
                row = "; ".join(
                    f"{what} " + " / ".join(f"{t:.1%}|{n:.1%}" for t, n in values) for what, values in cells.items()
                )
                lines.append(f"  {world:6s} {label:8s} {tasks:2d} tasks: {row}")
    return lines


# ------------------------------------------------------------------ the sealed readings' intervals: coverage
#: the main job's sealed readings: name -> (units, tasks a unit)
READINGS = {
    "sealed instances (12 families x 1)": (12, 1),
    "sealed families (2 families x 3)": (2, 3),
    "sealed tasks (8 pinned)": (8, 1),
    "restated tasks (4 pinned)": (4, 1),
}
#: the true lifts a family's gain averages to (each family gains twice the lift or nothing)
COVER_LIFTS = (0.0, 0.10, 0.25)


def true_lift(world: str, base: float, lift: float) -> float:
    """The expected lift over the world's families: half of them gain ``min(2 lift, 1 - rate)``, half nothing.

    With ``Q = 1 - rate`` ~ Beta(b, a) in the uneven world, E[min(c, Q)] = c P(Q > c) + E[Q; Q <= c]
    and E[Q; Q <= c] = b / (a + b) I_c(b + 1, a) (the incomplete beta function).
    """
    c = 2 * lift
    if world != "uneven" or not 0.0 < base < 1.0:
        return 0.5 * min(c, 1.0 - base)
    a, b = 0.5 * base, 0.5 * (1 - base)  # rate ~ Beta(a, b), so Q ~ Beta(b, a)
    below = b / (a + b) * float(special.betainc(b + 1, a, c))
    return 0.5 * (c * (1 - float(special.betainc(b, a, c))) + below)


def reading_draws(
    rng: np.random.Generator, world: str, draws: int, units: int, per: int, base: float, lift: float, attempts: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per-task scores (mean reward over ``attempts``) of the parent and the child, shape (draws, units * per) each.

    Each unit gains ``2 lift`` or nothing with even odds (clipped at a rate of 1); a unit's tasks share its rate
    and gain.
    """
    rates = np.repeat(WORLDS[world](rng, draws, units, base), per, axis=1)  # a unit's tasks share its rate
    gain = np.repeat(np.where(rng.random((draws, units)) < 0.5, 2 * lift, 0.0), per, axis=1)
    return scores(rng, rates, attempts), scores(rng, np.clip(rates + gain, 0.0, 1.0), attempts)


def bootstrap_bounds(diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Today's interval: the percentile bootstrap by task (the gate's resamples and seed), both bounds."""
    lo = bootstrap_lower_bounds(diffs, resamples=RESAMPLES, seed=GATE_SEED)
    hi = -bootstrap_lower_bounds(-diffs, resamples=RESAMPLES, seed=GATE_SEED)  # the same resamples, upper tail
    return lo, hi


def sign_flip_bounds(diffs: np.ndarray, units: int, per: int, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """The sign-flip permutation interval by unit: the shifts whose exact randomization test keeps p above alpha.

    Unit sums ``S`` minus ``shift * per`` are sign-flipped in every one of the 2^units ways;
    each bound is found by bisection from the mean (an accepted shift) to +-1, and 0 is
    kept when the test at 0 accepts (a closed region, and the common truth).
    """
    sums = diffs.reshape(len(diffs), units, per).sum(axis=2)
    signs = 1 - 2 * ((np.arange(2**units)[:, None] >> np.arange(units)) & 1)  # (2^units, units)

    def accepted(shift: np.ndarray) -> np.ndarray:
        x = sums - shift[:, None] * per
        return (np.abs(x @ signs.T) >= np.abs(x.sum(axis=1))[:, None] - 1e-9).mean(axis=1) > alpha

    mean = sums.sum(axis=1) / (units * per)
    bounds = []
    for edge in (-1.0, 1.0):
        inside, outside = mean.copy(), np.full_like(mean, edge)
        at_edge = accepted(outside)
        for _ in range(30):
            mid = (inside + outside) / 2
            ok = accepted(mid)
            inside, outside = np.where(ok, mid, inside), np.where(ok, outside, mid)
        bounds.append(np.where(at_edge, edge, inside))
    zero = accepted(np.zeros_like(mean))
    return np.where(zero, np.minimum(bounds[0], 0.0), bounds[0]), np.where(zero, np.maximum(bounds[1], 0.0), bounds[1])


def coverage_cell(world: str, units: int, per: int, attempts: int, base: float, lift: float, draws: int,
                  seed: int) -> dict[str, tuple[float, float]]:
    """Method -> (coverage, mean width) of the 95% interval over ``draws`` draws of one reading."""
    rng = np.random.default_rng(seed)
    parent, child = reading_draws(rng, world, draws, units, per, base, lift, attempts)
    truth = true_lift(world, base, lift)
    trials = units * per * attempts
    unit_of = [u for u in range(units) for _ in range(per)]
    _mean, new_lo, new_hi = clustered_lift_bounds(parent, child, unit_of, parent_trials=trials, child_trials=trials)
    methods = {
        "today": bootstrap_bounds(child - parent),
        "permutation": sign_flip_bounds(child - parent, units, per),
        "new": (new_lo, new_hi),
    }
    return {
        name: (float(((lo <= truth + 1e-9) & (truth - 1e-9 <= hi)).mean()), float((hi - lo).mean()))
        for name, (lo, hi) in methods.items()
    }


def coverage_table(draws: int, seed: int) -> list[str]:
    """Each cell's coverage and mean width (today | permutation | new), then a summary per reading and attempts.

    The summary (the table docs/evidence.md quotes) gives, per reading and attempts a task, the
    worst cell over both worlds and every parent/lift cell, the cell of a parent passing 0 with
    a lift of 0.10, and the mean width over the cells (reward units, of a range of 2).
    """
    methods = ("today", "permutation", "new")
    lines = [
        f"sealed readings: coverage of the 95% interval over {draws} draws a cell (today: percentile bootstrap by "
        "task | permutation: sign-flip by unit | new: MOVER-Wilson by unit), lifts varying by family; cells "
        "parent/lift; target >= 93%"
    ]
    summary = []
    for name, (units, per) in READINGS.items():
        lines.append(f"\n{name}")
        for attempts in (1, 2):
            got_cells: list[dict[str, tuple[float, float]]] = []
            near_zero: dict[str, tuple[float, float]] = {}
            for world in WORLDS:
                cells = []
                for base in BASELINES:
                    for lift in COVER_LIFTS:
                        got = coverage_cell(world, units, per, attempts, base, lift, draws, seed)
                        got_cells.append(got)
                        if (base, lift) == (0.0, 0.10):
                            near_zero = got  # the same draws in both worlds: every family passes nothing
                        cells.append(
                            f"{base:.2f}/{lift:.2f} " + "|".join(f"{got[m][0]:.1%}" for m in methods)
                            + " (width " + "|".join(f"{got[m][1]:.2f}" for m in methods) + ")"
                        )
                lines.append(f"  {attempts} attempt(s), {world:6s}: " + "; ".join(cells))
            summary.append(
                f"  {name}, {attempts} attempt(s): "
                + " / ".join(f"{min(c[m][0] for c in got_cells):.1%}" for m in methods) + " | "
                + " / ".join(f"{near_zero[m][0]:.1%}" for m in methods) + " | "
                + " / ".join(f"{np.mean([c[m][1] for c in got_cells]):.2f}" for m in methods)
            )
    lines.append(
        "\nper reading and attempts a task, today / permutation / new: the worst cell | the cell parent 0, "
        "lift +0.10 | the mean width over the cells"
    )
    return lines + summary


# ------------------------------------------------------------------ the race
def race_case(tasks: int, candidates: int, base: float, lift: float, races: int, seed: int) -> dict[str, float]:
    """Mean trials of the race with and without the early stop, and agreement with the full race's decision."""
    from mindforge.evaluation import PairRef, choose_successor
    from mindforge.evaluation.race import RaceConfig, plan_race
    from mindforge.trials.record import TrialRecord

    parent, names = PairRef(contract_hash="p" * 64), ["a" * 64, "b" * 64][:candidates]
    rates = {parent.contract_hash: base, names[0]: base + lift, **{c: base for c in names[1:]}}
    hashes = {f"t{i:02d}" for i in range(tasks)}
    config = RaceConfig(budget=2 * candidates, parent_attempts=2, resamples=RESAMPLES, seed=GATE_SEED)
    rng = np.random.default_rng(seed)
    run, full, same, early = [], 0, 0, 0
    for _ in range(races):
        outcome = {(c, t, a): float(rng.random() < min(1.0, r)) for c, r in rates.items() for t in hashes
                   for a in range(2)}

        def record(c: str, t: str, a: int, outcome: dict = outcome) -> TrialRecord:
            return TrialRecord(trial_id=f"{c[:1]}/{t}/{a}", run_id="r", task_id=t, task_hash=t, agent="model",
                               contract_hash=c, attempt=a, reward=outcome[(c, t, a)])

        stored: list[TrialRecord] = []
        while not (plan := plan_race(stored, parent, names, hashes, config)).done:
            stored += [record(t.contract_hash, t.task_hash, t.attempt) for t in plan.trials]
        whole = [record(c, t, a) for (c, t, a) in outcome]
        decide = [choose_successor(r, parent, names, hashes, resamples=RESAMPLES, seed=GATE_SEED) for r in
                  (stored, whole)]
        same += (decide[0].contract_hash, decide[0].promoted) == (decide[1].contract_hash, decide[1].promoted)
        run.append(plan.run_trials)
        full, early = plan.full_trials, early + plan.stopped_early
    return {"with": float(np.mean(run)), "without": float(full), "same": same / races, "early": early / races}


def race_table(races: int, seed: int) -> list[str]:
    """The race's mean trials with and without the early stop, per case."""
    lines = [f"\nthe successor race: mean trials over {races} simulated races (8 looks), with | without the early stop"]
    cases = [(12, 1), (24, 1), (36, 1), (12, 2)]
    worlds = [(0.25, 0.0), (0.5, 0.0), (0.25, 0.25), (0.0, 0.25)]
    for tasks, m in cases:
        cells = []
        for base, lift in worlds:
            r = race_case(tasks, m, base, lift, races, seed)
            ratio = r["with"] / r["without"]
            cells.append(
                f"    parent {base:.2f}, lift {lift:+.2f}: {r['with']:.1f} | {r['without']:.0f} trials ({ratio:.2f}x; "
                f"{r['early']:.0%} stopped early; the full race's decision in {r['same']:.0%})"
            )
        lines.append(f"  {tasks} tasks, {m} candidate(s):")
        lines += cells
    return lines


#: the lifts and attempts the sealed-instances reading's power is given at
POWER_LIFTS, POWER_ATTEMPTS = (0.10, 0.17, 0.25, 0.33), (1, 2, 3, 4)


def sealed_power_table(draws: int, seed: int) -> list[str]:
    """The sealed-instances reading's power: the share of draws whose 95% lower bound is above 0.

    At the main job's size (12 training families x 1 instance), the parent passing nothing
    (as the root does there), lifts that vary by family as in the coverage cells (each family
    gains twice the lift or nothing), by attempts a task: the product's own simulation
    (:func:`mindforge.evaluation.reading_power.reading_power`, which the main job sizes its
    sealed-instances attempts with), on the reported interval.
    """
    from mindforge.evaluation.reading_power import reading_power

    units, per = READINGS["sealed instances (12 families x 1)"]
    lines = [
        f"sealed instances ({units} families x {per}), parent passing 0: share of {draws} draws whose 95% lower "
        "bound (MOVER-Wilson by family) is above 0, by attempts a task (trials a pair: 12 x attempts)",
        "  lift  " + " ".join(f"{a:>2} attempt(s)" for a in POWER_ATTEMPTS),
    ]
    for lift in POWER_LIFTS:
        cells = [f"{reading_power(units, per, a, lift, draws=draws, seed=seed):>13.0%}" for a in POWER_ATTEMPTS]
        lines.append(f"  {lift:.2f}  " + " ".join(cells))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="400 draws a cell and 20 races a case: a smoke run")
    parser.add_argument("--draws", type=int, default=None, help="simulated decisions per cell (default 2000)")
    parser.add_argument("--races", type=int, default=None, help="simulated races per case (default 100)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--coverage", action="store_true", help="only the sealed readings' intervals' coverage")
    parser.add_argument("--sealed-power", action="store_true", help="only the sealed-instances reading's power")
    args = parser.parse_args(argv)
    draws = args.draws or (400 if args.quick else 2000)
    races = args.races or (20 if args.quick else 100)
    started = time.monotonic()
    if args.sealed_power:
        print("\n".join(sealed_power_table(draws, args.seed)))
        print(f"\n({time.monotonic() - started:.0f} s; simulated: independent attempts, no infrastructure errors)")
        return 0
    for line in coverage_table(draws, args.seed):
        print(line, flush=True)
    if not args.coverage:
        for line in gate_table(draws, args.seed) + race_table(races, args.seed):
            print(line, flush=True)
    print(f"\n({time.monotonic() - started:.0f} s; simulated: independent attempts, no infrastructure errors)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
