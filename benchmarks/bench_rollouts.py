"""Benchmark: rollouts a minute of SmolLM2-135M on llama.cpp against the machine's ceiling, before and after changes.

One run on this machine prints, side by side:

1. **The ceiling**, measured in the same run:

   - the model's tokens a second at full batch, prefill and decode
     (:mod:`benchmarks.model_ceiling`: ``llama_decode`` on every context at once, 8
     sequences a context, as the engine runs them) for the served configuration (Q8_0, one
     thread a context, one context a CPU) and, for reference, two threads a context and the
     GGUF's own Q4_1 weights;
   - the **Docker floor**: real trials (``run_trial`` in Docker sandboxes) on the fixed set,
     under ``hcp_contracts/smollm2.toml``, at the main job's trial concurrency (CPUs /
     ``settings.trial_cpus``), with the SCRIPTED POLICY (the one allowed test double) behind
     the real OpenAI-compatible HTTP API answering at once with each task's reference
     solution.

   A stage's ceiling is the lower of the floor and the rollouts a minute the model allows
   a trial of the stage's mean computed prompt tokens and completion tokens at the served
   configuration's tokens a second (:func:`benchmarks.rollout_parts.model_per_minute`).
   Beside it, the shared-core bound (:func:`benchmarks.rollout_parts.shared_core_bound`):
   the rate if sandbox work and model work take turns on the same cores. Both are measured
   with the whole machine to themselves, so the true ceiling lies between the two.
2. **Arms** (skipped by ``--ceiling``): each change in turn, on a cold server process of its
   own, with the same fixed set of trials (same tasks, same sampling seeds) under each of
   two contracts - ``json`` (the main job's root, ``hcp_contracts/smollm2.toml``: JSON
   actions, several turns) and ``library`` (the ``command`` format with the oracle-seeded
   experience library of the benchmark set's own search side, ``k`` = 4, built as
   ``bench_update`` builds one):

   - the slot engine before batching (:class:`benchmarks.baseline_engines.SlotEngine`, 2
     single-threaded slots), replies to EOS, a stop string or the cap;
   - the same with the early stop (replies end at their first action);
   - the batched engine (``python -m mindforge.policy.server --engine llamacpp``) on the
     GGUF's Q4_1 weights;
   - the batched engine on Q8_0 weights (the default);
   - the default with compact worked examples (``resources.example_style = "compact"``),
     when the contract has that field (else a note says the arm was skipped).

   Per arm: rollouts a minute (trials over the batch's wall time) and its ratio to the
   previous arm, the pass rate with its Wilson 95% interval, the difference from the
   previous arm with a 95% interval paired by task (cluster bootstrap), mean computed
   prompt tokens, completion tokens and model calls a trial, and the ratio to the ceiling.
3. ``--lineage NAME``: rollouts a minute of each stage of that lineage in the store (trials
   over the union of the stage's trial intervals, as ``../shared/tools/stage_rates.py``
   counts), its tokens from the trials' transcripts, its ceiling and the ratio.
4. ``--slots``: trials at once (this benchmark's workers, the Ray-side concurrency) at 4, 8,
   12 and 16 (``--slot-values``) with the default engine: rollouts a minute of each contract.

**The tasks**: instances of the benchmark-only families in ``benchmarks/families`` (never
bundled tasks, which can be a lineage's sealed task), drawn with the product's sampler
(seeded), validated as the product validates instances; ``--trials`` of them make the
fixed set, ``--search-tasks`` others the library's search side.

Run on demand, on a quiet machine (needs the ``llamacpp`` extra and ``mindforge dev up``)::

    .venv/bin/python benchmarks/bench_rollouts.py                         # ceiling + arms (about 30 min)
    .venv/bin/python benchmarks/bench_rollouts.py --lineage NAME --slots  # + a lineage's stages + slots
    .venv/bin/python benchmarks/bench_rollouts.py --ceiling               # the ceiling only (a few minutes)
    .venv/bin/python benchmarks/bench_rollouts.py --trials 4 --search-tasks 4   # a smoke run
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.model_ceiling import CeilingConfig, TokenRates, measure  # noqa: E402 - after the path
from benchmarks.rollout_parts import (  # noqa: E402 - after the path
    REPO,
    Batch,
    active_seconds,
    ceiling,
    model_per_minute,
    paired_difference,
    per_minute,
    rate_text,
    run_seeded,
    shared_core_bound,
    trial_cost,
)

#: the served configuration first, then the references
CONFIGS = (
    CeilingConfig("q8_0", 1), CeilingConfig("q8_0", 2), CeilingConfig("gguf", 1), CeilingConfig("gguf", 2),
    CeilingConfig("q8_0", 1, flash_attn=False), CeilingConfig("q8_0", 1, unified=True),
)
#: entries the library contract retrieves a task (bench_update's)
K = 4
BATCHED = ("mindforge.policy.server", ("--model", "smollm2", "--engine", "llamacpp"))


@dataclass(frozen=True)
class Arm:
    """One state of the rollout path: the server process to start and whether prompts are compact."""

    label: str
    module: str
    args: tuple[str, ...]
    compact: bool = False


ARMS = (
    Arm("slot engine, no early stop", "benchmarks.rollout_parts", ()),
    Arm("+ early stop", "benchmarks.rollout_parts", ("--early-stop",)),
    Arm("+ batched engine (Q4_1)", BATCHED[0], (*BATCHED[1], "--weights", "gguf")),
    Arm("+ Q8_0 weights (default)", BATCHED[0], BATCHED[1]),
    Arm("+ compact prompts", BATCHED[0], BATCHED[1], compact=True),
)


def main_concurrency() -> int:
    """Trials the main job runs at once here: the Ray head's CPUs over ``settings.trial_cpus``."""
    from mindforge.settings import get_settings

    return max(1, int((os.cpu_count() or 1) / get_settings().trial_cpus))


def compact(contract: Any) -> Any | None:
    """``contract`` with ``resources.example_style = "compact"``, or None when contracts have no such field."""
    from mindforge.hcp import derive
    from mindforge.hcp.sections import ResourcesSection

    if "example_style" not in ResourcesSection.model_fields:
        return None
    return derive(contract, revision=f"{contract.mindforge.revision}-compact",
                  edit="resources.example_style = compact", changes={"resources.example_style": "compact"})


def library_contract(search: list[Any], runner: Any) -> tuple[Any, str]:
    """The ``command`` contract with the oracle-seeded library of the benchmark's search side (as ``bench_update``)."""
    from benchmarks.bench_experience import command_contract
    from benchmarks.bench_experience_library import oracle_library
    from benchmarks.rollout_parts import LINEAGE

    oracle = oracle_library(runner, search, LINEAGE)
    return oracle.attach(command_contract(), k=K, provenance="oracle"), oracle.summary()


def docker_floor(runner: Any, tasks: list[Any], contract: Any, workers: int) -> Batch:
    """Scripted trials (reference solution at once) on ``tasks``, at least two rounds of ``workers``."""
    from benchmarks.rollout_parts import floor_script
    from mindforge.policy.doubles.scripted import start_scripted_policy

    server = start_scripted_policy(floor_script(tasks, contract.model.id))
    try:
        attempts = max(1, math.ceil(2 * workers / len(tasks)))
        return run_seeded(runner, server.base_url, contract, tasks, "floor", workers, attempts)
    finally:
        server.stop()


def cold_batch(arm: Arm, runner: Any, contract: Any, tasks: list[Any], label: str, workers: int) -> Batch:
    """Start ``arm``'s server process, run the trials against it, stop it (no batch sees another's cache)."""
    from mindforge.policy.server.runner import PolicyServerProcess

    logs = runner.artifact_root / "servers"
    logs.mkdir(parents=True, exist_ok=True)
    server = PolicyServerProcess(arm.module, list(arm.args), ready_timeout_sec=600, log_path=logs / "server.log",
                                 env={"PYTHONPATH": str(REPO)}).start()
    try:
        batch = run_seeded(runner, server.base_url, contract, tasks, label, workers)
    finally:
        server.stop()
    print(f"  {label}: {len(batch.records)} trials in {batch.wall_sec:.0f} s, "
          f"{sum(r.passed for r in batch.records)} passed", flush=True)
    return batch


def arm_rows(batches: list[tuple[str, Batch]], floor: float, served: TokenRates) -> list[str]:
    """The arms of one contract: one row each, against the previous arm."""
    rows = [f"  {'arm':<32} {'/min':>5} {'x prev':>6}  {'passed [95% Wilson]':<24} "
            f"{'diff vs prev [95% by task]':<27} {'prompt':>6} {'compl':>5} {'calls':>5} {'ceiling':>7} {'x ceil':>6}"]
    for i, (label, b) in enumerate(batches):
        prev = batches[i - 1][1] if i else None
        passed = sum(1 for r in b.records if r.passed)
        usable = sum(1 for r in b.records if r.has_real_reward)
        diff = "-"
        if prev is not None:
            mean, lo, hi, n = paired_difference(prev.rewards(), b.rewards())
            diff = f"{mean:+.2f} [{lo:+.2f}, {hi:+.2f}] n={n}"
        allowed = model_per_minute(b.mean("computed_tokens"), b.mean("completion_tokens"),
                                   served.prefill_tps, served.decode_tps)
        top = ceiling(floor, allowed)
        ratio = f"{b.per_minute / prev.per_minute:.2f}x" if prev is not None and prev.per_minute else "-"
        rows.append(
            f"  {label:<32} {b.per_minute:>5.1f} {ratio:>6}  {rate_text(passed, usable):<24} {diff:<27} "
            f"{b.mean('computed_tokens'):>6.0f} {b.mean('completion_tokens'):>5.0f} {b.mean('requests'):>5.1f} "
            f"{top:>7.1f} {b.per_minute / top:>5.2f}x"
        )
    return rows


def run_arms(
    runner: Any, contracts: dict[str, Any], tasks: list[Any], workers: int
) -> dict[str, list[tuple[str, Batch]]]:
    """Every arm on every contract (contract -> [(arm, batch)]); the compact arm only where the field exists."""
    out: dict[str, list[tuple[str, Batch]]] = {name: [] for name in contracts}
    for arm in ARMS:
        for name, contract in contracts.items():
            if arm.compact:
                contract = compact(contract)
                if contract is None:
                    print(f"  {arm.label}: skipped: contracts have no resources.example_style field yet", flush=True)
                    break
            out[name].append((arm.label, cold_batch(arm, runner, contract, tasks, f"{name}: {arm.label}", workers)))
    return out


def run_slots(runner: Any, contracts: dict[str, Any], tasks: list[Any], values: list[int]) -> list[str]:
    """Rollouts a minute at each number of trials at once, default engine, each contract on a cold server."""
    default = next(a for a in ARMS if a.label.endswith("(default)"))
    heads = " ".join(f"{name + ' /min (passed)':>24}" for name in contracts)
    rows = [f"  {'at once':>7} {heads} {'all /min':>9}"]
    for n in values:
        batches = [cold_batch(default, runner, c, tasks, f"{name}: {n} at once", n) for name, c in contracts.items()]
        cells = [f"{b.per_minute:>13.1f} ({sum(r.passed for r in b.records):>2}/{len(b.records):<3})" for b in batches]
        total = per_minute(sum(len(b.records) for b in batches), sum(b.wall_sec for b in batches))
        rows.append(f"  {n:>7} " + " ".join(f"{c:>24}" for c in cells) + f" {total:>9.1f}")
    return rows


def stage_row(gen: str, stage: str, recs: list[Any], active: float, floor: float, served: TokenRates) -> str:
    """One row of the lineage table: rate over ``active`` seconds, mean tokens (trials with transcripts), ceiling."""
    seen = [c for c in (trial_cost(r) for r in recs) if c.transcript]
    computed = sum(c.computed_tokens for c in seen) / max(len(seen), 1)
    completion = sum(c.completion_tokens for c in seen) / max(len(seen), 1)
    allowed = model_per_minute(computed, completion, served.prefill_tps, served.decode_tps)
    rate, top = per_minute(len(recs), active), ceiling(floor, allowed)
    shared = shared_core_bound(floor, allowed)
    return (f"  {gen:>3} {stage:<10} {len(recs):>6} {sum(1 for r in recs if r.passed):>6} {active:>8.0f} {rate:>6.1f} "
            f"{computed:>6.0f} {completion:>5.0f} {len(seen):>11} {allowed:>12.1f} {top:>7.1f} {rate / top:>5.2f}x "
            f"{shared:>6.1f} {rate / shared:>5.2f}x")


def lineage_rows(name: str, floor: float, served: TokenRates) -> list[str]:
    """Each (generation, stage) of lineage ``name``, then all, counted as ``stage_rates.py`` does, against ceilings."""
    from mindforge.settings import get_settings
    from mindforge.store import engine as se
    from mindforge.store import lineages, trials

    settings = get_settings()
    groups: dict[tuple[int, str], list[Any]] = {}
    with se.session_scope(se.init_db(settings.db_url)) as s:
        lineage = lineages.get_lineage_by_name(session=s, name=name)
        if lineage is None:
            raise SystemExit(f"no lineage named {name!r} in {settings.db_url}")
        for row in trials.list_trials(session=s, lineage_id=lineage.id):
            if row.started_at is not None and row.finished_at is not None:
                groups.setdefault((row.generation_index or 0, row.stage), []).append(row.to_record())
    rows = [f"  {'gen':>3} {'stage':<10} {'trials':>6} {'passed':>6} {'active s':>8} {'/min':>6} {'prompt':>6} "
            f"{'compl':>5} {'transcripts':>11} {'model allows':>12} {'ceiling':>7} {'x ceil':>6} "
            f"{'shared':>6} {'x shr':>6}"]
    every: list[Any] = []
    total = 0.0
    for (gen, stage), recs in sorted(groups.items(), key=lambda kv: min(r.started_at for r in kv[1])):
        active = active_seconds((r.started_at.timestamp(), r.finished_at.timestamp()) for r in recs)
        rows.append(stage_row(str(gen), stage, recs, active, floor, served))
        every, total = every + recs, total + active
    rows.append(stage_row("", "all", every, total, floor, served))
    return rows


def measure_ceiling(args: argparse.Namespace) -> list[TokenRates]:
    """Every configuration's tokens a second (the served one first)."""
    from mindforge.policy.engines.models import resolve_model
    from mindforge.settings import get_settings

    gguf = Path(str(resolve_model("smollm2").gguf_path))
    cache = get_settings().data_dir / "models"  # the server's cache of re-stored weights
    return [measure(c, gguf, cache, depth=args.depth, decode_steps=args.decode_steps) for c in CONFIGS]


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--trials", type=int, default=24, help="tasks in the fixed set (one trial each, every arm)")
    parser.add_argument("--search-tasks", type=int, default=12, help="search-side tasks seeding the library")
    parser.add_argument("--ceiling", action="store_true", help="only the ceiling (and --lineage / --slots): no arms")
    parser.add_argument("--lineage", default=None, help="a lineage in the store: its stages against the ceiling")
    parser.add_argument("--slots", action="store_true", help="rollouts a minute by trials at once (default engine)")
    parser.add_argument("--slot-values", default="4,8,12,16", help="trials at once for --slots")
    parser.add_argument("--depth", type=int, default=1024, help="ceiling: prompt tokens a sequence (decode depth)")
    parser.add_argument("--decode-steps", type=int, default=64, help="ceiling: decode steps a context")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.bench_real_model import Runner
    from benchmarks.rollout_parts import draw_task_set, validate_task_set
    from mindforge.hcp import load_contract
    from mindforge.settings import get_settings

    args = parse(argv)
    t0 = time.monotonic()
    workers = main_concurrency()
    runner = Runner("", get_settings().artifacts / "bench_rollouts", workers=4)
    root = load_contract(REPO / "hcp_contracts" / "smollm2.toml")
    with tempfile.TemporaryDirectory() as tmp:
        with_library = not args.ceiling or args.slots
        fixed, search = draw_task_set(Path(tmp), args.trials, args.search_tasks if with_library else 0)
        validate_task_set([*fixed, *search], runner)
        print(f"task set: {len(fixed)} fixed + {len(search)} search-side instances, valid", flush=True)
        rates = measure_ceiling(args)
        floor = docker_floor(runner, fixed, root, workers)
        served = rates[0]
        contracts: dict[str, Any] = {"json": root}
        summary = ""
        if with_library:
            contracts["library"], summary = library_contract(search, runner)
        arms = {} if args.ceiling else run_arms(runner, contracts, fixed, workers)
        slots = run_slots(runner, contracts, fixed, [int(v) for v in args.slot_values.split(",")]) if args.slots else []
        stages = lineage_rows(args.lineage, floor.per_minute, served) if args.lineage else []
    runner.pool.shutdown()

    cpus = os.cpu_count() or 1
    print(f"\n=== bench_rollouts (SmolLM2-135M-Instruct on llama.cpp, {cpus} CPUs, {workers} trials at once) ===")
    print(f"model ceiling (llama_decode, all contexts at once, 8 sequences a context, depth {args.depth} tokens):")
    for r in rates:
        note = "  <- served" if r is served else ""
        print(f"  {r.config.label(cpus):<30} prefill {r.prefill_tps:>6.0f} tok/s  decode {r.decode_tps:>6.0f} tok/s"
              + note)
    print(f"Docker floor (scripted policy, reference solutions, {workers} at once): {floor.per_minute:.1f} trials/min "
          f"({sum(r.passed for r in floor.records)}/{len(floor.records)} passed, "
          f"Docker {floor.mean('docker_sec'):.2f} s + agent {floor.mean('agent_sec'):.2f} s a trial)")
    if summary:
        print(f"library contract: {summary}")
    for name, batches in arms.items():
        print(f"\n--- arms, contract {name}: {len(fixed)} tasks, one trial each (same seeds), {workers} at once; "
              "prompt = computed prompt tokens a trial")
        print("\n".join(arm_rows(batches, floor.per_minute, served)))
    if stages:
        print(f"\n--- lineage {args.lineage}: stages against the ceiling (Docker floor {floor.per_minute:.1f}/min)")
        print("\n".join(stages))
    if slots:
        print(f"\n--- trials at once, default engine, {len(fixed)} trials a contract")
        print("\n".join(slots))
    print(f"\nwall time {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
