"""Benchmark: the product's Update on a real model - on-policy GRPO iterations, sealed lift, rollout rate.

One lineage of SmolLM2-135M-Instruct on the full micro suite (``tasks/micro``, split by
the lineage into search / selection / sealed) with no Discovery and an Expansion that only
evaluates the contract on the search split (``--base-attempts`` a task; no configuration
search, no experience rounds, so the contract stays fixed), run through the product code:
``LineageWorkflow`` -> ``ExpansionWorkflow`` -> ``UpdateWorkflow`` on a Temporal dev server
with in-process workers, trials as Ray tasks in Docker sandboxes against the llama.cpp
policy server, GRPO on LoRA with the product's ``UpdateSpec`` and ``TrainerConfig``
defaults (only the loop's size is set here). The base evaluation is the curriculum's first
evidence: the Update draws first from search tasks whose pass rate so far lies strictly
between 0 and 1. (Without it - an Update-only lineage, as this benchmark ran before - the
first draw is 8 unseen tasks: on 2026-12-02 it passed 0 of 64 rollouts, and the Update,
rightly, trained nothing.) The contract is fixed, so the lineage's training contract is
it and the generation's sealed lift is exactly (contract, new adapter) over (contract,
base weights).

**The contract.** The experience-library contract, oracle-seeded, built with
``bench_experience``'s functions (the same code that benchmark measures): the SmolLM2 baseline
with the ``command`` action format (:func:`benchmarks.bench_experience.command_contract`),
carrying a snapshot of the lineage's own experience library - the reference solutions
(``solution/solve.sh``) of the **lineage's search split** (the split the lineage assigns,
keyed by its name: :func:`benchmarks.bench_experience.split_suite`), each validated by
replay with no model (:func:`benchmarks.bench_experience_library.oracle_library`) - and
retrieving ``k`` entries a task by BM25, never the task's own
(:meth:`benchmarks.bench_experience_library.LibraryBuild.attach`). No selection or sealed
task is mined, and no hand-written example (``benchmarks/reference_examples`` restates
bundled tasks' solutions) is shown.

It prints:

- the training-reward curve (mean rollout reward per iteration, flat-group fraction,
  tokens, loss, seconds) and two least-squares slopes of reward with their 95% intervals
  (t distribution; target: the interval excludes 0): of the iteration means on the
  iteration, and of each rollout's reward on its policy version within tasks
  (:func:`mindforge.evaluation.within_task_slope`). The curriculum draws other tasks in
  each iteration (unseen ones among them, mostly failed), so the iteration means move with
  the mix of tasks as much as with the adapter; the within-task slope compares a task
  only with itself;
- the promotion gate's selection lift (the decision), then the sealed lift of (contract,
  new adapter) over (contract, base weights), paired by task, with its 95% bootstrap
  interval, task count and trial count (target: lower bound above 0). When the gate
  promoted the adapter this is the generation's own sealed lift; when it did not, the
  generation measures none (there is no change to measure), and the benchmark runs both
  pairs on the sealed split itself - the same tasks and attempts, in-process against the
  same server - as a **benchmark-only reading** that no decision reads and the store does
  not hold (its trials go under ``<artifacts>/bench_update/sealed``);
- rollouts per minute (rollout trials over the span of their start and finish times)
  against the Docker floor at concurrency 2 (``benchmarks/bench_trial.py``'s plain
  ``docker`` CLI trial, no model; target >= 0.5x the floor and >= 3x the 12-16 a minute
  of the main job);
- wall time.

Run on demand (needs the ``llamacpp`` extra and ``mindforge dev up``)::

    .venv/bin/python benchmarks/bench_update.py            # 8 iterations, G=8, B=8 (under 60 min)
    .venv/bin/python benchmarks/bench_update.py --quick    # 2 iterations, G=4, B=3 (under 10 min)
    .venv/bin/python benchmarks/bench_update.py --guidance # off-policy guides join failed groups

``--guidance`` turns on the Update's off-policy guidance (``UpdateSpec.guidance``,
:mod:`mindforge.trainer.guidance`): a group whose rollouts all failed is joined by the
task's own entry of the contract's oracle-seeded library (its reference solution, from
the search split), so the curriculum reaches every search task, not only the few the
base model sometimes passes.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPO = Path(__file__).resolve().parents[1]
LINEAGE = "bench-update"
#: entries the contract retrieves a task (bench_experience's default)
K = 4


def library_contract(name: str, out_dir: Path, base_url: str) -> tuple[Path, str]:
    """The oracle-seeded experience-library contract of lineage ``name``'s search split, saved as TOML.

    Args:
        name: the lineage name, which keys its split (as ``prepare_lineage`` keys it).
        out_dir: where the contract file is written.
        base_url: the policy endpoint (unused by the replays, which run no model).

    Returns:
        ``(contract path, the library's summary in words)``.
    """
    from benchmarks.bench_experience import command_contract, split_suite
    from benchmarks.bench_experience_library import oracle_library
    from benchmarks.bench_real_model import Runner
    from mindforge.hcp import save_contract
    from mindforge.settings import get_settings

    search = split_suite(key=name)["search"]
    runner = Runner(base_url, get_settings().artifacts / "bench_update", workers=2)
    try:
        oracle = oracle_library(runner, search, name)
    finally:
        runner.pool.shutdown()
    contract = oracle.attach(command_contract(), k=K, provenance="oracle")
    return save_contract(contract, out_dir / "smollm2-bench-update.toml"), oracle.summary()


def reward_slope(points: list[tuple[int, float]]) -> tuple[float, float, float] | None:
    """Least-squares slope of reward on iteration with its 95% interval (t, n - 2 df); None under 3 points."""
    from mindforge.evaluation import ols_slope

    fit = ols_slope(points)
    return None if fit is None else (fit.slope, fit.lo, fit.hi)


def rollout_points(rows: list[Any], iterations: list[dict[str, Any]]) -> list[tuple[str, float, float]]:
    """(task hash, policy version, reward) of each rollout with a real reward, for the within-task slope.

    The policy version is the position of the adapter the rollout drew from among the
    distinct adapters the iterations drew from, in iteration order (0: the first
    iteration's adapter); an iteration that trained nothing leaves the next one drawing
    from the same adapter, so both share a version.
    """
    versions: dict[str, int] = {}
    for it in sorted(iterations, key=lambda it: it["iteration"]):
        versions.setdefault(it.get("adapter", ""), len(versions))
    out = []
    for row in rows:
        record = row.to_record()
        if record.has_real_reward and record.reward is not None and row.adapter in versions:
            out.append((row.task_hash, float(versions[row.adapter]), float(record.reward)))
    return out


def docker_floor_per_minute(trials: int = 6, workers: int = 2) -> float:
    """Plain ``docker`` CLI trials (no model) per minute at ``workers`` at once (benchmarks/bench_trial.py)."""
    from benchmarks.bench_trial import docker_cli_trial, make_task
    from mindforge.settings import get_settings
    from mindforge.tasks.loader import load_task
    from mindforge.trials.run import open_engine

    engine, image_map = open_engine(get_settings())
    with tempfile.TemporaryDirectory() as tmp:
        task = load_task(make_task(Path(tmp)))
        engine.build_image(task, image_map=image_map)
        docker_cli_trial(task.image_tag, task.path)  # warm-up
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(lambda _i: docker_cli_trial(task.image_tag, task.path), range(trials)))
        return trials / ((time.perf_counter() - started) / 60.0)


def _rollouts_per_minute(rows: list[Any]) -> float | None:
    """Rollouts per minute over the time some rollout ran (the union of their intervals), training excluded."""
    from benchmarks.bench_stage_throughput import stage_rates

    done = [r for r in rows if r.finished_at is not None]
    if len(done) < 2:
        return None
    rate = stage_rates({"rollout": done}).get("rollout", {}).get("per_min_busy")
    return rate or None


def sealed_reading(name: str, record: dict[str, Any], base_url: str, attempts: int) -> Any:
    """The benchmark-only sealed lift of (training contract, last adapter) over (training contract, base weights).

    Both pairs run every sealed task of lineage ``name`` ``attempts`` times, in-process
    (:class:`benchmarks.bench_real_model.Runner`) against the policy server that still
    serves the adapter; the trials are not stored, and nothing reads the figure but this
    print-out.

    Returns:
        the :class:`mindforge.evaluation.LiftReport`, or None when the Update registered no adapter.
    """
    from benchmarks.bench_real_model import Runner
    from mindforge.evaluation import PairRef, PoolSplit, paired_lift
    from mindforge.hcp import loads_contract
    from mindforge.settings import get_settings
    from mindforge.store import engine as se
    from mindforge.store import pool, registry
    from mindforge.tasks.loader import load_task
    from workers.update_activities import successor_contract

    settings = get_settings()
    contract_hash = (record.get("update", {}).get("plan") or {}).get("contract_hash") or ""
    with se.session_scope(se.init_db(settings.db_url)) as s:
        adapters = registry.list_adapters(session=s, lineage_id=name)
        row = registry.get_contract(session=s, content_hash=contract_hash) if contract_hash else None
        stored = pool.list_pool_tasks(session=s, lineage_id=name, split=PoolSplit.SEALED)
        sealed = [load_task(Path(t.path)) for t in stored]
    if not adapters or row is None:
        return None
    training = loads_contract(row.toml_text, source=f"contract {contract_hash}")
    adapted = successor_contract(training, adapters[-1].name)
    pairs = {"base": training, "adapter": adapted}
    jobs = [
        (task, contract, f"bench-sealed-{label}-{task.content_hash[:12]}-{a}", a)
        for label, contract in pairs.items() for task in sealed for a in range(attempts)
    ]
    runner = Runner(base_url, settings.artifacts / "bench_update" / "sealed" / name, workers=2)
    try:
        records = runner.run(jobs, run_id=f"{name}-sealed-reading")
    finally:
        runner.pool.shutdown()
    return paired_lift(
        records, PairRef(contract_hash=training.content_hash, adapter=""),
        PairRef(contract_hash=adapted.content_hash, adapter=adapted.model.adapter),
        {t.content_hash for t in sealed}, measured_on=PoolSplit.SEALED,
    )


def main(argv: list[str] | None = None) -> int:
    from benchmarks.bench_real_model import single_reading_lift
    from benchmarks.product_lineage import run_product_lineage
    from mindforge.evaluation import SplitConfig, within_task_slope
    from mindforge.payloads import (
        EvaluationSpec,
        ExpansionSpec,
        ExperienceSpec,
        LineageSpec,
        RuntimeSpec,
        SearchBudgetSpec,
        Stage,
        UpdateSpec,
    )
    from mindforge.policy.engines.models import resolve_model
    from mindforge.policy.server.server import start_policy_server
    from mindforge.settings import get_settings
    from mindforge.store import engine as se
    from mindforge.store import lineages, trials
    from mindforge.trainer.curriculum import pass_rates

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 iterations, G=4, B=3, 1 sealed attempt (< 10 min)")
    parser.add_argument("--name", default=None, help="lineage name (default: bench-update-<time>)")
    parser.add_argument("--base-attempts", type=int, default=2, help="base-evaluation attempts per search task")
    parser.add_argument("--guidance", action="store_true", help="off-policy guides join groups that all failed")
    args = parser.parse_args(argv)
    t0 = time.monotonic()
    quick = args.quick
    loop_size: dict[str, Any] = (
        {"iterations": 2, "group_size": 4, "tasks_per_iteration": 3, "time_budget_sec": 300.0}
        if quick else {"iterations": 8, "group_size": 8, "tasks_per_iteration": 8, "time_budget_sec": 2400.0}
    )
    settings = get_settings()
    resolved = resolve_model("smollm2")
    name = args.name or f"{LINEAGE}-{time.strftime('%Y%m%d-%H%M%S')}"
    server = start_policy_server("smollm2", engine="llamacpp")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            contract_path, library = library_contract(name, Path(tmp), server.base_url)
            print(f"experience library (oracle, search split of {name}): {library}", flush=True)
            spec = LineageSpec(
                name=name,
                tasks=[str(REPO / "tasks" / "micro")],
                contract_path=str(contract_path),
                stages=[Stage.EXPANSION, Stage.UPDATE],
                expansion=ExpansionSpec(
                    attempts=args.base_attempts,
                    search=SearchBudgetSpec(enabled=False),
                    experience=ExperienceSpec(enabled=False),
                ),
                runtime=RuntimeSpec(policy_url=server.base_url, trial_batch_size=8, heartbeat_timeout_sec=600),
                update=UpdateSpec(base_model_path=resolved.hf_dir, guidance=args.guidance, **loop_size),
                evaluation=EvaluationSpec(splits=SplitConfig(), attempts=1 if quick else 4),
            )
            asyncio.run(run_product_lineage(spec, settings))
        with se.session_scope(se.init_db(settings.db_url)) as s:
            gen = lineages.get_generation(session=s, lineage_id=name, index=0)
            record = dict(gen.record) if gen is not None else {}
        attempts = spec.evaluation.attempts
        whole, _report, _why = single_reading_lift(record)
        reading = None if whole else sealed_reading(name, record, server.base_url, attempts)
    finally:
        server.stop()
    floor = docker_floor_per_minute()
    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        rollouts = trials.list_trials(session=s, lineage_id=name, stage="rollout")
        base = [r.to_record() for r in trials.list_trials(session=s, lineage_id=name, stage="expansion")]
        rates = pass_rates(base, {r.task_hash for r in base})
        mixed = sum(1 for t in rates.values() if t.rate is not None and 0.0 < t.rate < 1.0)
        rate = _rollouts_per_minute(rollouts)
        update = record.get("update", {})
        its = update.get("iterations", [])
        points = rollout_points(rollouts, its)
    print(f"\n=== bench_update ({'quick' if quick else 'full'}; SmolLM2-135M-Instruct, tasks/micro, one run) ===")
    print(f"training contract: {update.get('plan', {}).get('note', '')}")
    print(f"experience library (oracle-seeded, the lineage's search split, k={K}): {library}")
    print(f"base evaluation (search split): {sum(1 for r in base if r.passed)}/{len(base)} trials passed on "
          f"{len(rates)} tasks; {mixed} task(s) with a pass rate strictly between 0 and 1")
    print(f"outcome: {update.get('outcome')} {update.get('reason', '')}")
    gate = (update.get("promotion") or {}).get("lift") or {}
    if gate.get("mean") is not None:
        print(f"promotion gate (selection split, the decision): lift {gate['mean']:+.3f} (95% CI {gate['lo']:+.3f}.."
              f"{gate['hi']:+.3f}) on {gate['n_tasks']} tasks, {gate['n_trials']} trials (base "
              f"{gate['parent_score']:.3f} -> adapter {gate['successor_score']:.3f}): "
              f"{'promoted' if update['promotion']['promoted'] else 'not promoted'}")
    print("training reward per iteration (search split; a training signal, not skill):")
    for it in its:
        loss = "-" if it.get("loss") is None else f"{it['loss']:+.4f}"
        print(f"  it {it['iteration']}: mean reward {it['mean_reward']:.3f} on {it['rollouts']} rollouts "
              f"({it['passed']} passed), flat groups {it['flat_groups']}/{it['groups']}, draws {it['draws']}, "
              f"{it.get('guided_groups', 0)} guided, {it['steps']} steps, {it['tokens_trained']} tokens, loss {loss}, "
              f"{it['seconds']:.0f} s "
              f"{it.get('reason', '')}")
    slope = reward_slope([(it["iteration"], it["mean_reward"]) for it in its])
    if slope is None:
        print("  reward slope of the iteration means: fewer than 3 iterations, no interval")
    else:
        print(f"  reward slope of the iteration means: {slope[0]:+.4f} per iteration (95% CI {slope[1]:+.4f}.."
              f"{slope[2]:+.4f}, {len(its)} points; target: excludes 0)")
    within = within_task_slope(points)
    if within is None:
        print("  reward slope within tasks: no task was drawn under two policy versions")
    else:
        print(f"  reward slope within tasks (task fixed effects; each iteration's mix of tasks drops out): "
              f"{within.slope:+.4f} per policy version (95% CI {within.lo:+.4f}..{within.hi:+.4f}; "
              f"{within.n} rollouts of {within.groups} tasks, {within.df} df; target: excludes 0): "
              f"{'met' if within.lo > 0 else 'NOT met'}")
    lift, ev, why_not = single_reading_lift(record)
    if lift:
        print(f"sealed lift of (contract, new adapter) over (contract, base weights): {lift['mean']:+.3f} "
              f"(95% CI {lift['lo']:+.3f}..{lift['hi']:+.3f}) on {lift['n_tasks']} sealed tasks, "
              f"{lift['n_trials']} trials (base {ev.get('parent_score', math.nan):.3f} -> "
              f"adapter {ev.get('successor_score', math.nan):.3f})")
    elif reading is not None and reading.mean is not None:
        print(f"sealed lift of (contract, new adapter) over (contract, base weights), a benchmark-only reading (the "
              f"generation measured none: {why_not}): {reading.mean:+.3f} (95% CI "
              f"{reading.lo:+.3f}..{reading.hi:+.3f}) on {reading.n_tasks} sealed tasks, {reading.n_trials} trials "
              f"(base {reading.parent_score:.3f} -> adapter {reading.successor_score:.3f}; "
              "target: lower bound above 0)")
    else:
        why = reading.reason if reading is not None else "the Update registered no adapter"
        print(f"no sealed lift: {why_not}; benchmark reading: {why}")
    if rate is not None:
        print(f"rollouts per minute (while rollouts ran): {rate:.1f} over {len(rollouts)} rollouts; Docker floor at "
              f"concurrency 2: "
              f"{floor:.1f}/min; ratio {rate / floor:.2f}x (target >= 0.5x), vs the main job's 12-16/min: "
              f"{rate / 14:.2f}x (target >= 3x)")
    else:
        print(f"rollouts per minute: not measured ({len(rollouts)} rollouts); Docker floor {floor:.1f}/min")
    secs = [it["seconds"] for it in its]
    if secs:
        print(f"iteration seconds: median {statistics.median(secs):.0f}")
    print(f"wall time {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
