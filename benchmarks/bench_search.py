"""Configuration search in simulated worlds: the race against today's allocator and random search.

Trial outcomes are simulated in-process (:mod:`benchmarks.simulate`): an outcome oracle
stands in for the sandbox and the scripted policy so that thousands of attempts run in
seconds. Everything else is the product's code: the base evaluation's transcripts are
audited by the real audit rules, and every strategy runs through the same candidates,
allocator, state and budget (``init_search`` / ``plan_step`` / ``observe``).

``--mode worlds`` (the default; targets and figures in docs/benchmarks.md), at the main job's 8 cells a step,
on budgets of 48 and 96 trials, 50 seeds each (decoys, and off the shortlist the fix, are
drawn per seed):

- *today*: 39 tasks, each unlocked by its own edit at p = 0.6 and hinted by the audit
  (13 kinds; the world the coverage allocator was built on); *today + idle library*: the
  same with a lineage library that lifts nothing (the cost of shortlisting it);
- *global*: the main job's root (``smollm2.toml``) and 24 failing tasks; one edit - the
  lineage's library, the move to its experience snapshot - lifts every task at p = 0.1
  or 0.3, its 34 operator edits are decoys at 0 or 0.02, and the tasks' audits point
  elsewhere; *global, fix off the shortlist*: the fix is a uniformly drawn operator edit
  instead (nothing shortlists it);
- *mixed*: the global fix and, besides, each task unlocked by its own edit at 0.6.

Strategies: ``race`` (the default), ``today's allocator`` (``strategy="adaptive"``, the
coverage allocator before the race), ``random`` (tasks and single edits drawn uniformly)
and, on request, ``race, Thompson`` (Thompson draws in exploration). Printed per world,
budget and strategy: how often the race entrant (``ranked_candidates[0]``) carries the fix,
the entrant's true pass rate and its ratio to the best single edit's (the oracle's pick:
what a sweep of that edit at any budget measures, in expectation), and coverage; then the
attempts after which the entrant is the fix for good, for the race and for random search::

    python benchmarks/bench_search.py [--seeds 50] [--budgets 48,96] [--jobs 1]

``--mode unlock`` (the benchmark before the race) compares the coverage allocator with
random search and the best single contract swept round robin on today's world: attempts
to full cumulative coverage and coverage at fixed budgets::

    python benchmarks/bench_search.py --mode unlock [--seeds 10] [--tasks 39] [--p 0.6]

``--mode rankings`` measures the coverage allocator's audit-fit rankings
(``SearchConfig.audit_fit_ranking``), written to put the coupled ``command`` format first
for one model, against measured progress, in five worlds of two-edit tasks from the
shipped JSON baseline given the ten placeholder examples
(:data:`benchmarks.simulate.SIM_EXAMPLES`); printed per world and p: tasks covered
within the budget, summed over the seeds, with and without the rankings::

    python benchmarks/bench_search.py --mode rankings [--seeds 8] [--tasks 10] [--budget 96]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.simulate import (  # noqa: E402 - after the sys.path insert
    SIM_EXAMPLES,
    UNLOCKS,
    UnlockOracle,
    World,
    WorldOracle,
    base_search_tasks,
    best_single_rate,
    global_world,
    make_unlock_tasks,
    matching_kind,
    plain_root,
    today_world,
)
from mindforge.hcp import load_contract  # noqa: E402 - after the sys.path insert
from mindforge.search import (  # noqa: E402 - after the sys.path insert
    SearchBudget,
    SearchConfig,
    StepResults,
    init_search,
    make_candidate,
    materialize,
    observe,
    operator_edits,
    plan_step,
    search_trial_id,
)
from mindforge.search.coverage import Ledger  # noqa: E402 - after the sys.path insert
from mindforge.search.summary import ranked_candidates  # noqa: E402 - after the sys.path insert

REPO = Path(__file__).resolve().parents[1]


def bench_root():
    """The unlock benchmark's base contract: the shipped baseline with bash and finish only."""
    return plain_root()


def run_strategy(root, tasks, failing, config: SearchConfig, seed: int, p: float, max_attempts: int):
    """Run one search to full coverage or the budget; returns (attempts to full coverage or None, curve)."""
    oracle = UnlockOracle(root, tasks, seed=seed, p_unlocked=p)
    state = init_search(
        job_id=f"bench-{seed}", root=root, tasks=failing, budget=SearchBudget(max_attempts=max_attempts), config=config
    )
    while not state.done:
        plan = plan_step(state)
        results = oracle.execute(state, plan) if plan.stop_reason is None else StepResults(step=plan.step)
        state = observe(state, results)
    full = state.spent.attempts if state.stop_reason == "full_coverage" else None
    return full, state.curve


def run_single_contract(root, tasks, failing, edit_key: str, seed: int, p: float, max_attempts: int):
    """Sweep one fixed contract over the failing set, round robin over the tasks it has not solved.

    Not a search (one contract cannot be searched over), so it runs outside the
    allocator, through the same candidate code, oracle and :class:`~mindforge.search.coverage.Ledger`.
    """
    edit = next(e for e in operator_edits(root) if e.key == edit_key)
    cand = make_candidate(root, [edit], origin="operator", step=0)
    contract = materialize(root, cand.edits)
    oracle = UnlockOracle(root, tasks, seed=seed, p_unlocked=p)
    ledger = Ledger(tasks=[t.task_hash for t in failing])
    attempts: dict[str, int] = {}
    while len(ledger.coverage_curve()) <= max_attempts:
        open_tasks = [t.task_hash for t in failing if t.task_hash not in ledger.cumulative()]
        if not open_tasks:
            break
        task = min(open_tasks, key=lambda h: (attempts.get(h, 0), h))
        attempt = attempts[task] = attempts.get(task, 0) + 1
        trial_id = search_trial_id(f"single-{seed}", task, cand.contract_hash, attempt)
        ledger.add(task, cand.contract_hash, oracle.outcome(trial_id, oracle.unlocks(task, contract)))
    curve = ledger.coverage_curve()
    return (curve[-1][0] if ledger.summary().cumulative == len(failing) else None), curve


def covered_at(curve: list[tuple[int, int]], budget: int) -> int:
    """Tasks covered once ``budget`` attempts were spent (steps that would exceed it do not count)."""
    return max((covered for spent, covered in curve if spent <= budget), default=0)


def best_single_edit(root, tasks) -> tuple[str, int]:
    """The single operator edit whose contract unlocks the most tasks, and how many."""
    best, count = "", -1
    for edit in operator_edits(root):
        contract = materialize(root, make_candidate(root, [edit], origin="operator", step=0).edits)
        unlocked = sum(UNLOCKS[t.kind](root, contract) for t in tasks)
        if unlocked > count:
            best, count = edit.key, unlocked
    return best, count


def _all_reached(attempts: list[int | None]) -> list[int] | None:
    """Every run's attempts to full coverage, or None when some run never got there."""
    reached = [a for a in attempts if a is not None]
    return reached if len(reached) == len(attempts) else None


def ranking_worlds(n_tasks: int) -> dict[str, list[str]]:
    """World name -> the kinds of its ``n_tasks`` tasks (cycled by :func:`make_unlock_tasks`)."""
    def matching(fmt: str) -> list[str]:
        return [matching_kind(fmt, e.name) for e in SIM_EXAMPLES]

    return {
        "command + any example": ["combo:command+example"],
        "fenced_bash + any example": ["combo:fenced_bash+example"],
        "command + matching example": matching("command"),
        "fenced_bash + matching example": matching("fenced_bash"),
        "mixed": [
            "combo:command+example", "combo:fenced_bash+example", *matching("command")[:2], *matching("fenced_bash")[:2]
        ],
    }


def rankings_main(args: argparse.Namespace) -> int:
    """``--mode rankings``: covered tasks with and without ``audit_fit_ranking`` per world and p."""
    root = load_contract(REPO / "hcp_contracts" / "baseline.toml")
    ps = [float(p) for p in args.ps.split(",")]
    print(f"from {root.ref} (JSON), {args.tasks} tasks a world, budget {args.budget} attempts, "
          f"{args.seeds} seeds, {len(SIM_EXAMPLES)} placeholder examples offered")  # fmt: skip
    header = f"{'world':<31} {'p':>4} {'rankings on':>12} {'off (default)':>14} {'off - on':>9}"
    print(header + "\n" + "-" * len(header))
    totals = {True: 0, False: 0}
    for world, kinds in ranking_worlds(args.tasks).items():
        tasks = make_unlock_tasks(args.tasks, kinds)
        failing = base_search_tasks(tasks, root)
        for p in ps:
            covered = {}
            for ranked in (True, False):
                runs = [
                    run_strategy(
                        root, tasks, failing,
                        SearchConfig(strategy="adaptive", seed=seed, examples=SIM_EXAMPLES, audit_fit_ranking=ranked),
                        seed, p, args.budget,
                    )
                    for seed in range(args.seeds)
                ]  # fmt: skip
                covered[ranked] = sum(covered_at(curve, args.budget) for _full, curve in runs)
                totals[ranked] += covered[ranked]
            cap = args.tasks * args.seeds
            print(f"{world:<31} {p:>4} {covered[True]:>7}/{cap:<4} {covered[False]:>9}/{cap:<4} "
                  f"{covered[False] - covered[True]:>+9}")  # fmt: skip
    print(f"all worlds: rankings on {totals[True]}, off {totals[False]} "
          f"({totals[False] - totals[True]:+d} tasks covered without them)")  # fmt: skip
    return 0


class WorldRun(BaseModel):
    """One search in one world: what the race gets and what it covered.

    Attributes:
        fix: the entrant (``ranked_candidates[0]``) carries the world's fix.
        rate: the entrant's true pass rate over the failing tasks (0 without an entrant).
        covered: failing tasks solved by any candidate (cumulative coverage).
        found_at: attempts after which the entrant carried the fix at every later step
            (None: not by the end of the run).
    """

    fix: bool
    rate: float
    covered: int
    found_at: int | None = None


def run_world(world: World, config: SearchConfig, seed: int, budget: int) -> WorldRun:
    """Run one search in ``world`` to its budget through the product's allocator; see :class:`WorldRun`."""
    oracle = WorldOracle(world, seed=seed)
    state = init_search(
        job_id=f"world-{seed}", root=world.root, tasks=world.failing, budget=SearchBudget(max_attempts=budget),
        config=config,
    )  # fmt: skip
    found_at: int | None = None
    while not state.done:
        plan = plan_step(state)
        state = observe(state, oracle.execute(state, plan) if plan.stop_reason is None else StepResults(step=plan.step))
        entrant = next(iter(ranked_candidates(state)), None)
        has_fix = entrant is not None and world.has_fix(oracle.edit_keys[entrant])
        found_at = (found_at if found_at is not None else state.spent.attempts) if has_fix else None
    entrant = next(iter(ranked_candidates(state)), None)
    return WorldRun(
        fix=entrant is not None and world.has_fix(oracle.edit_keys[entrant]),
        rate=oracle.true_rate(entrant) if entrant is not None else 0.0,
        covered=state.covered,
        found_at=found_at,
    )


def world_configs(world: World, seed: int, cells: int) -> dict[str, SearchConfig]:
    """Strategy name -> its configuration in ``world`` (the product's defaults but for the strategy)."""
    common = {"seed": seed, "cells_per_step": cells, "experience_snapshot": world.snapshot_json}
    return {
        "race": SearchConfig(**common),
        "today's allocator": SearchConfig(strategy="adaptive", **common),
        "random": SearchConfig(strategy="random", **common),
        "race, Thompson": SearchConfig(selection="thompson", **common),
    }


def make_worlds(seed: int) -> list[World]:
    """The benchmark's worlds for one seed (decoys and, off the shortlist, the fix are drawn per seed)."""
    return [
        today_world(),
        global_world(seed, 0.1),
        global_world(seed, 0.3),
        global_world(seed, 0.1, mixed=True),
        global_world(seed, 0.3, mixed=True),
        global_world(seed, 0.3, fix="operator"),
        today_world(library=True),
    ]


def _seed_runs(job: tuple[int, list[int], int, list[str], int]) -> tuple[dict[str, float], dict[tuple, WorldRun]]:
    """Every world's runs for one seed: (world -> best single rate, (world, strategy, budget) -> run).

    Budget -1 is the long run that times finding the fix (random search's twice as long).
    """
    seed, budgets, cells, strategies, find_cap = job
    best: dict[str, float] = {}
    runs: dict[tuple, WorldRun] = {}
    for world in make_worlds(seed):
        best[world.name] = best_single_rate(world)[1]
        for name, config in world_configs(world, seed, cells).items():
            if name not in strategies:
                continue
            for budget in budgets:
                runs[(world.name, name, budget)] = run_world(world, config, seed, budget)
            if world.fix_key is not None and name in ("race", "random"):
                runs[(world.name, name, -1)] = run_world(world, config, seed, find_cap * (2 if name == "random" else 1))
    return best, runs


def _median(values: list[int | None], cap: int) -> str:
    """The median of attempts-to-find, a run that never found it counting as more than ``cap``."""
    mid = statistics.median((v if v is not None else cap + 1) for v in values)
    return f">{cap}" if mid > cap else f"{mid:.0f}"


def worlds_main(args: argparse.Namespace) -> int:
    """``--mode worlds``: the race against today's allocator and random search in three worlds (see the docstring)."""
    budgets = [int(b) for b in args.budgets.split(",")]
    runs: dict[tuple[str, str, int], list[WorldRun]] = defaultdict(list)
    best: dict[str, list[float]] = defaultdict(list)
    t0 = time.monotonic()
    jobs = [(seed, budgets, args.cells, args.strategies.split(";"), args.find_cap) for seed in range(args.seeds)]
    with multiprocessing.Pool(args.jobs) as workers:
        for seed_best, seed_runs in workers.imap(_seed_runs, jobs):
            for name, rate in seed_best.items():
                best[name].append(rate)
            for key, run in seed_runs.items():
                runs[key].append(run)
    print(f"{args.seeds} seeds, budgets {budgets}, {args.cells} cells a step; {time.monotonic() - t0:.0f} s\n")
    header = (f"{'world':<38} {'budget':>6} {'strategy':<18} {'entrant is the fix':>18} "
              f"{'entrant rate':>12} {'/ best single':>13} {'coverage':>9}")  # fmt: skip
    print(header + "\n" + "-" * len(header))
    for world_name in best:
        oracle_rate = statistics.mean(best[world_name])
        for budget in budgets:
            for name in args.strategies.split(";"):
                group = runs.get((world_name, name, budget))
                if not group:
                    continue
                fix = f"{sum(r.fix for r in group)}/{len(group)}" if "today" not in world_name else "-"
                rate = statistics.mean(r.rate for r in group)
                print(f"{world_name:<38} {budget:>6} {name:<18} {fix:>18} {rate:>12.3f} "
                      f"{rate / oracle_rate:>12.2f}x {statistics.mean(r.covered for r in group):>9.1f}")  # fmt: skip
    print("\n(entrant rate: the true pass rate of ranked_candidates[0] over the failing tasks, mean over seeds; "
          "/ best single: over the best single edit's true rate, the oracle's pick;\n"
          " coverage: failing tasks solved by any candidate)\n")  # fmt: skip
    print(f"attempts until the entrant is the fix for good (median over seeds; race runs of {args.find_cap}, "
          f"random of {2 * args.find_cap} attempts):")  # fmt: skip
    for world_name in best:
        race, rand = runs.get((world_name, "race", -1)), runs.get((world_name, "random", -1))
        if race and rand:
            print(f"  {world_name:<38} race {_median([r.found_at for r in race], args.find_cap):>6}   "
                  f"random {_median([r.found_at for r in rand], 2 * args.find_cap):>6}")  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("worlds", "unlock", "rankings"), default="worlds")
    parser.add_argument("--tasks", type=int, default=None, help="number of tasks (unlock: 39, >= 30; rankings: 10)")
    parser.add_argument("--seeds", type=int, default=None, help="unlock: 10; rankings: 8")
    parser.add_argument("--p", type=float, default=0.6, help="success probability when unlocked (< 1)")
    parser.add_argument("--budgets", default="100,200,400,800", help="attempt budgets for coverage")
    parser.add_argument("--max-attempts", type=int, default=6000, help="cap on attempts per run")
    parser.add_argument("--budget", type=int, default=96, help="rankings: attempts per run (the main job's)")
    parser.add_argument("--ps", default="0.2,0.6", help="rankings: success probabilities when unlocked")
    parser.add_argument("--cells", type=int, default=8, help="worlds: cells a step (the main job's)")
    parser.add_argument(
        "--strategies", default="race;today's allocator;random",
        help="worlds: strategies, ';'-separated (also 'race, Thompson': Thompson draws in exploration)",
    )  # fmt: skip
    parser.add_argument("--jobs", type=int, default=1, help="worlds: processes running seeds side by side")
    parser.add_argument("--find-cap", type=int, default=384, help="worlds: attempts of the runs timing the fix")
    args = parser.parse_args(argv)
    if args.mode == "worlds":
        args.seeds = args.seeds or 50
        if args.budgets == "100,200,400,800":
            args.budgets = "48,96"
        return worlds_main(args)
    if args.mode == "rankings":
        args.tasks = args.tasks or 10
        args.seeds = args.seeds or 8
        return rankings_main(args)
    args.tasks = args.tasks or 39
    args.seeds = args.seeds or 10
    budgets = [int(b) for b in args.budgets.split(",")]
    root = bench_root()
    tasks = make_unlock_tasks(args.tasks)
    failing = base_search_tasks(tasks, root)
    single_key, single_unlocks = best_single_edit(root, tasks)
    strategies = {
        "adaptive": lambda s: SearchConfig(seed=s, strategy="adaptive"),
        "adaptive, no audits": lambda s: SearchConfig(seed=s, strategy="adaptive", use_audits=False),
        "random": lambda s: SearchConfig(seed=s, strategy="random"),
    }
    print(f"{len(tasks)} tasks ({len(failing)} failing under the base), "
          f"{len(set(t.kind for t in tasks))} unlock kinds, "
          f"p = {args.p}, {args.seeds} seeds, edit space {len(operator_edits(root))} single edits")  # fmt: skip
    print(f"best single contract: {single_key} (unlocks {single_unlocks}/{len(tasks)} tasks)\n")
    full: dict[str, list[int | None]] = {}
    cover: dict[str, dict[int, list[int]]] = {}
    for name in [*strategies, "best single contract"]:
        t0 = time.monotonic()
        if name in strategies:
            runs = [
                run_strategy(root, tasks, failing, strategies[name](seed), seed, args.p, args.max_attempts)
                for seed in range(args.seeds)
            ]
        else:
            runs = [
                run_single_contract(root, tasks, failing, single_key, seed, args.p, max(budgets))
                for seed in range(args.seeds)
            ]
        full[name] = [f for f, _ in runs]
        cover[name] = {b: [covered_at(curve, b) for _, curve in runs] for b in budgets}
        print(f"  ran {name!r}: {time.monotonic() - t0:.1f} s")
    print()
    header = f"{'strategy':<22} {'attempts to full coverage (mean, median, range)':<50}" + "".join(
        f"{'@' + str(b):>8}" for b in budgets
    )
    print(header)
    print("-" * len(header))
    for name in full:
        reached = [f for f in full[name] if f is not None]
        if len(reached) == len(full[name]):
            cell = f"{statistics.mean(reached):7.1f} {statistics.median(reached):7.1f}   {min(reached)}..{max(reached)}"
        else:
            cell = f"never in {len(full[name]) - len(reached)}/{len(full[name])} runs" + (
                f" (others mean {statistics.mean(reached):.0f})" if reached else ""
            )
        cov = "".join(f"{statistics.mean(cover[name][b]):8.1f}" for b in budgets)
        print(f"{name:<22} {cell:<50}{cov}")
    print(f"(coverage columns: mean tasks covered of {len(tasks)} at that many attempts)\n")
    adaptive, rand = _all_reached(full["adaptive"]), _all_reached(full["random"])
    if adaptive is not None and rand is not None:
        ratios = [a / r for a, r in zip(adaptive, rand, strict=True)]
        mean_ratio = statistics.mean(adaptive) / statistics.mean(rand)
        print(
            f"adaptive / random attempts to full coverage: mean {mean_ratio:.3f}; "
            f"per seed {min(ratios):.3f}..{max(ratios):.3f}"
        )
        print(
            "target (adaptive needs at most half the attempts of random search): "
            f"{'met' if max(ratios) <= 0.5 else 'NOT met'}"
        )
        ablation = _all_reached(full["adaptive, no audits"])
        if ablation is not None:
            print(
                f"adaptive without audit priors / random: mean {statistics.mean(ablation) / statistics.mean(rand):.3f}"
            )
    for b in budgets:
        single = statistics.mean(cover["best single contract"][b])
        ada = statistics.mean(cover["adaptive"][b])
        ran = statistics.mean(cover["random"][b])
        print(f"at {b:>4} attempts: adaptive covers {ada:.1f}, random {ran:.1f} ({ada / max(ran, 1e-9):.2f}x), "
              f"best single contract {single:.1f} ({ada / max(single, 1e-9):.2f}x)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
