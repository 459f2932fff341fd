"""Benchmark: a generation at scale, simulated from a measured lineage's per-stage costs.

Reads the measured lineages' generation (trial phase timings and tokens, the generation's
interval, its training record) from a store, read-only, measures Ray's per-task dispatch
overhead on the local head (``--ray-tasks`` no-op tasks), then:

1. **Check.** Simulates each measured generation on the shape it ran on (this machine:
   2 sandbox slots, llama.cpp with 2 parallel slots, CPU training as measured) with
   ``mindforge.scale.simulate`` and compares the simulated wall time with the measured one:
   target within 20% (ratio 0.8..1.2).
2. **Projection.** Scales the generation to a nightly run (``--tasks`` x ``--attempts``)
   on ``--nodes`` x ``--slots`` sandbox slots plus one GPU node for training: target within
   8 hours. Prints where the time goes per stage, each resource's use, the projection at
   0.5x and 2x of every uncertain figure, and the limiting resource (the one whose 2x
   relief shortens the generation most).

Every figure the projection rests on is printed as measured, derived or ASSUMED.

Run: ``.venv/bin/python benchmarks/bench_scale.py [--store PATH_OR_URL] [--lineage mj4 --lineage bb2]``
(default store: the dev store, ``MINDFORGE_DATA_DIR``'s ``mindforge.db``; needs the Ray head
of ``mindforge dev up`` unless ``--dispatch-sec`` is given).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from mindforge.scale.costs import (  # noqa: E402 - after the path set-up for a direct run
    FIELDS,
    TokenRates,
    TrialWork,
    costs_from_records,
    fit_token_rates,
    pools_by_stage,
    split_trial,
)
from mindforge.scale.nightly import NightlySpec, Overheads, nightly_plan  # noqa: E402 - as above
from mindforge.scale.plan import (  # noqa: E402 - as above
    Cluster,
    GenerationPlan,
    PolicyServer,
    Serial,
    TimedTrial,
    TrialWave,
    plan_from_timeline,
)
from mindforge.scale.simulate import SimResult, simulate  # noqa: E402 - as above

#: the check's target: simulated / measured wall time within this fraction
CHECK_TOLERANCE = 0.20
#: the projection's target, hours
TARGET_HOURS = 8.0

#: ASSUMED: per-request model speed of vLLM on one GPU node over llama.cpp on this machine's 2 cores
#: (prefill, about 2/3 of the measured model time, gains far more than decode on a GPU; 4x is low)
GPU_MODEL_SPEEDUP = 4.0
#: ASSUMED: requests the GPU server serves at once at full speed (vLLM's --max-num-seqs default, 256)
GPU_LANES = 256
#: ASSUMED: trained tokens per second on the GPU node over the measured CPU run, per token
GPU_TRAIN_SPEEDUP = 100.0
#: ASSUMED: fixed seconds per training run on the GPU node (model load, adapter save, hand-off)
GPU_TRAIN_FIXED_SEC = 30.0


def _store_url(store: str) -> str:
    """A SQLAlchemy URL for ``store``: a URL as given, a SQLite path opened read-only."""
    if "://" in store:
        return store
    path = Path(store).resolve()
    if not path.is_file():
        raise SystemExit(f"bench_scale: store {path}: no such file")
    return f"sqlite:///file:{path}?mode=ro&uri=true"


def _default_store() -> str:
    from mindforge.settings import get_settings

    return get_settings().db_url


def _when(value: Any) -> datetime:
    """A stored timestamp (a datetime, or SQLite's text) as an aware UTC datetime."""
    when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def read_lineage(url: str, lineage: str, generation: int) -> dict[str, Any]:
    """The generation's trials (plain records), interval, record and spec, read-only.

    Raises:
        SystemExit: the lineage or generation is not in the store, or has no finished trials.
    """
    engine = create_engine(url)
    cols = ", ".join(FIELDS)
    with engine.connect() as conn:
        gen = conn.execute(
            text('SELECT started_at, finished_at, record FROM generations WHERE lineage_id = :l AND "index" = :g'),
            {"l": lineage, "g": generation},
        ).first()
        spec = conn.execute(text("SELECT spec FROM lineages WHERE id = :l"), {"l": lineage}).scalar()
        rows = (
            conn.execute(
                text(
                    f"SELECT {cols}, worker, started_at, finished_at FROM trials WHERE lineage_id = :l "
                    "AND generation_index = :g AND finished_at IS NOT NULL"
                ),
                {"l": lineage, "g": generation},
            )
            .mappings()
            .all()
        )
    engine.dispose()
    if gen is None or gen.finished_at is None or not rows:
        raise SystemExit(f"bench_scale: {url}: lineage {lineage!r} generation {generation}: not finished or no trials")
    record = gen.record if isinstance(gen.record, dict) else json.loads(gen.record)
    return {
        "records": [dict(r) for r in rows],
        "started_at": _when(gen.started_at),
        "finished_at": _when(gen.finished_at),
        "record": record,
        "spec": spec if isinstance(spec, dict) else json.loads(spec or "{}"),
    }


def measure_dispatch(address: str, n: int) -> dict[str, float]:
    """Ray's overhead per task on a head: ``n`` no-op tasks, one by one and all at once.

    Args:
        address: ``local`` (a private head of 2 CPUs started for the measurement) or a cluster's address.
        n: no-op tasks of one CPU each (as a trial task asks; the local head has 2, warmed first).

    Returns:
        ``latency_sec`` (one task submitted and fetched, median), ``batch_sec`` (wall of
        ``n`` tasks submitted together, per task: the head's dispatch rate), ``n``.
    """
    import ray

    if address == "local":  # a private head on this machine, started and stopped here
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    else:
        ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    try:
        noop = ray.remote(num_cpus=1)(lambda: None)
        ray.get([noop.remote() for _ in range(10)])  # warm the workers
        latencies = []
        for _ in range(n):
            t = time.perf_counter()
            ray.get(noop.remote())
            latencies.append(time.perf_counter() - t)
        t = time.perf_counter()
        ray.get([noop.remote() for _ in range(n)])
        batch = (time.perf_counter() - t) / n
    finally:
        ray.shutdown()
    return {"latency_sec": statistics.median(latencies), "batch_sec": batch, "n": float(n)}


def _work(lin: dict[str, Any]) -> tuple[TokenRates, dict[str, list[TrialWork]]]:
    costs = costs_from_records(lin["records"], source=lin["source"])
    rates = fit_token_rates(costs)
    return rates, pools_by_stage(split_trial(c, rates) for c in costs)


def _timeline_plan(lin: dict[str, Any]) -> GenerationPlan:
    trials = [
        TimedTrial(stage=r["stage"], started_at=_when(r["started_at"]), finished_at=_when(r["finished_at"]))
        for r in lin["records"]
    ]
    training = float(lin["record"].get("update", {}).get("training", {}).get("wall_sec") or 0.0)
    return plan_from_timeline(trials, lin["started_at"], lin["finished_at"], training_sec=training)


def _runs(plan, pools, cluster, server, dispatch_sec, seeds) -> list[SimResult]:
    return [simulate(plan, pools, cluster, server, dispatch_sec=dispatch_sec, seed=s) for s in range(seeds)]


def _wave_sec(plan_or_result: Any) -> float:
    return sum(s.wall_sec for s in plan_or_result.steps if s.kind == "trials")


def check(name: str, lin: dict[str, Any], dispatch_sec: float, seeds: int) -> dict[str, Any]:
    """Simulate a measured generation on the shape it ran on; print and return the ratio to the measured wall."""
    rates, pools = _work(lin)
    plan = _timeline_plan(lin)
    slots = _slots(lin)
    cluster, server = Cluster(nodes=1, slots_per_node=slots), PolicyServer(lanes=2)
    results = _runs(plan, pools, cluster, server, dispatch_sec, seeds)
    measured = (lin["finished_at"] - lin["started_at"]).total_seconds()
    spans = sorted(r.makespan_sec for r in results)
    median = statistics.median(spans)
    measured_waves = _measured_wave_sec(lin)
    sim_waves = statistics.median(_wave_sec(r) for r in results)
    ratio = median / measured
    met = abs(ratio - 1) <= CHECK_TOLERANCE
    print(f"\n## Check: {name} generation on its own shape ({slots} slots, llama.cpp 2 parallel slots, CPU training)")
    print(
        f"  token fit over {rates.trials} trials (R^2 {rates.r2:.2f}): agent_sec ~ {rates.fixed_sec:.2f} s"
        f" + completion / {rates.completion_tokens_per_sec:.1f} tok/s"
        f" + prompt / {rates.prompt_tokens_per_sec:.0f} tok/s"
    )
    print(
        f"  plan: {sum(isinstance(s, TrialWave) for s in plan.steps)} trial waves ({plan.n_trials} trials), "
        f"serial gaps {sum(s.seconds for s in plan.steps if isinstance(s, Serial)):.0f} s, "
        f"training {sum(getattr(s, 'seconds', 0.0) for s in plan.steps if s.kind == 'training'):.0f} s"
    )
    print(
        f"  measured wall {measured:,.0f} s; simulated median {median:,.0f} s over {seeds} seeds "
        f"(5%..95% {spans[int(0.05 * len(spans))]:,.0f}..{spans[int(0.95 * len(spans)) - 1]:,.0f} s)"
    )
    print(f"  ratio simulated / measured {ratio:.3f}: within {CHECK_TOLERANCE:.0%}: {'MET' if met else 'NOT MET'}")
    print(
        f"  trial waves alone (the part simulated, not replayed): measured {measured_waves:,.0f} s, simulated "
        f"{sim_waves:,.0f} s, ratio {sim_waves / measured_waves:.3f}"
    )
    return {"rates": rates, "pools": pools, "plan": plan, "ratio": ratio, "slots": slots}


def cross_check(target: str, lin: dict[str, Any], source: str, pools: dict[str, list[TrialWork]],
                dispatch_sec: float, seeds: int) -> float:
    """Out of sample: ``target``'s generation with trial costs resampled from ``source``'s trials.

    Returns:
        the simulated / measured ratio of the trial waves (the part the costs drive).
    """
    plan = _timeline_plan(lin)
    cluster = Cluster(nodes=1, slots_per_node=_slots(lin))
    results = _runs(plan, pools, cluster, PolicyServer(lanes=2), dispatch_sec, seeds)
    measured = (lin["finished_at"] - lin["started_at"]).total_seconds()
    whole = statistics.median(r.makespan_sec for r in results) / measured
    waves = statistics.median(_wave_sec(r) for r in results) / _measured_wave_sec(lin)
    met = abs(whole - 1) <= CHECK_TOLERANCE
    print(
        f"  cross check: {target}'s generation with {source}'s trial costs: ratio {whole:.3f} "
        f"({'MET' if met else 'NOT MET'} within {CHECK_TOLERANCE:.0%}), trial waves alone {waves:.3f}"
    )
    return whole


def _measured_wave_sec(lin: dict[str, Any]) -> float:
    plan = _timeline_plan(lin)
    return (lin["finished_at"] - lin["started_at"]).total_seconds() - sum(
        getattr(s, "seconds", 0.0) for s in plan.steps if s.kind != "trials"
    )


def _slots(lin: dict[str, Any]) -> int:
    """Sandbox slots the generation ran on: the most trials running at once."""
    edges = sorted(
        [(_when(r["started_at"]), 1) for r in lin["records"]] + [(_when(r["finished_at"]), -1) for r in lin["records"]],
        key=lambda e: (e[0], e[1]),
    )
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def overheads_from(plan: GenerationPlan, lin: dict[str, Any], slots: int) -> Overheads:
    """The nightly plan's serial and replay costs, read off a measured generation's plan and record.

    discovery: the gap before the first wave; replays: the gap after the base trials (audit
    included) in slot-seconds over the replays the library's oracle round ran; search finish:
    the longest gap from the first search wave to the first selection wave; other barriers:
    the median gap between waves; the gate: the tail after the last wave.
    """
    gaps = [s.seconds for s in plan.steps if isinstance(s, Serial)]
    labels = [s.label for s in plan.steps]
    first_search = next(i for i, s in enumerate(plan.steps) if isinstance(s, TrialWave) and "search" in s.counts)
    first_sel = next(i for i, s in enumerate(plan.steps) if isinstance(s, TrialWave) and "selection" in s.counts)
    search_gaps = [s.seconds for s in plan.steps[first_search:first_sel] if isinstance(s, Serial)]
    oracle = lin["record"].get("experience", {}).get("oracle", {})
    replays = int(oracle.get("replayed", 0)) * int(
        lin["spec"].get("expansion", {}).get("experience", {}).get("replays", 1)
    )
    after_base = plan.steps[labels.index(next(x for x in labels if x.startswith("expansion"))) + 1]
    replay_sec = after_base.seconds * slots / replays if isinstance(after_base, Serial) and replays else 0.0
    return Overheads(
        discovery_sec=gaps[0],
        replay_job_sec=replay_sec,
        search_finish_sec=max(search_gaps),
        barrier_sec=statistics.median(gaps[1:-1]),
        gate_sec=gaps[-1],
    )


def training_cost(lineages: dict[str, dict[str, Any]]) -> tuple[str, dict[str, float]]:
    """CPU seconds per trained token and trained tokens per sample, from the first lineage that trained.

    Raises:
        SystemExit: no lineage given trained an adapter.
    """
    for name, lin in lineages.items():
        train = lin["record"].get("update", {}).get("training") or {}
        if train.get("trained") and train.get("tokens_trained") and train.get("samples_used"):
            return name, {
                "cpu_sec_per_token": float(train["wall_sec"]) / float(train["tokens_trained"]),
                "tokens_per_sample": float(train["tokens_trained"]) / float(train["samples_used"]),
                "wall_sec": float(train["wall_sec"]),
                "tokens": float(train["tokens_trained"]),
            }
    raise SystemExit(f"bench_scale: none of {sorted(lineages)} trained an adapter: no training cost to scale")


#: the projection's uncertain figures: name -> (default, what it is, how it was got)
KNOBS: dict[str, tuple[float, str, str]] = {
    "nodes": (16, "sandbox nodes", "the target shape"),
    "model_speedup": (GPU_MODEL_SPEEDUP, "policy server per-request speed over llama.cpp on 2 cores", "ASSUMED"),
    "lanes": (
        GPU_LANES,
        "requests the policy server serves at once at full speed",
        "ASSUMED (vLLM --max-num-seqs 256)",
    ),
    "train_speedup": (GPU_TRAIN_SPEEDUP, "GPU training tokens/s over the measured CPU run", "ASSUMED"),
    "train_fixed_sec": (GPU_TRAIN_FIXED_SEC, "fixed seconds per GPU training run", "ASSUMED (hand-off measured 3.2 s)"),
    "tokens_per_sample_x": (1.0, "trained tokens per rollout (x measured; every rollout trained)", "ASSUMED 1x"),
    "sandbox_x": (1.0, "sandbox and tool seconds per trial on a cluster node (x measured)", "ASSUMED 1x"),
    "orchestration_x": (1.0, "serial gaps and replay seconds (x measured; not growing with tasks)", "ASSUMED 1x"),
    "dispatch_x": (1.0, "Ray dispatch seconds per task (x measured on the local head)", "ASSUMED 1x"),
}


def _scaled_pools(pools: dict[str, list[TrialWork]], x: float) -> dict[str, list[TrialWork]]:
    """Pools with sandbox and tool seconds times ``x`` (model seconds unchanged)."""
    return {
        stage: [
            w.model_copy(
                update={"setup_sec": w.setup_sec * x, "tool_sec": w.tool_sec * x, "finish_sec": w.finish_sec * x}
            )
            for w in works
        ]
        for stage, works in pools.items()
    }


def project_once(knobs: dict[str, float], ctx: dict[str, Any], seed: int = 0) -> SimResult:
    """One projected nightly generation under ``knobs`` (see :data:`KNOBS`)."""
    spec: NightlySpec = ctx["spec"]
    train = ctx["train"]
    tokens = spec.rollouts_per_iteration * train["tokens_per_sample"] * knobs["tokens_per_sample_x"]
    training_sec = knobs["train_fixed_sec"] + tokens * train["cpu_sec_per_token"] / knobs["train_speedup"]
    o: Overheads = ctx["overheads"]
    x = knobs["orchestration_x"]
    over = Overheads(
        discovery_sec=o.discovery_sec * x,
        replay_job_sec=o.replay_job_sec * x,
        search_finish_sec=o.search_finish_sec * x,
        barrier_sec=o.barrier_sec * x,
        gate_sec=o.gate_sec * x,
    )
    plan = nightly_plan(
        spec.model_copy(update={"search_step_trials": int(knobs["nodes"]) * ctx["slots_per_node"]}),
        over,
        training_sec=training_sec,
    )
    return simulate(
        plan,
        _scaled_pools(ctx["pools"], knobs["sandbox_x"]),
        Cluster(nodes=int(knobs["nodes"]), slots_per_node=ctx["slots_per_node"]),
        PolicyServer(lanes=max(1, int(knobs["lanes"])), model_speedup=knobs["model_speedup"]),
        dispatch_sec=ctx["dispatch_sec"] * knobs["dispatch_x"],
        seed=seed,
    )


#: relieving each resource 2x: resource -> (knob, factor)
RELIEF = {
    "sandbox slots (2x nodes)": ("nodes", 2.0),
    "policy server speed (2x)": ("model_speedup", 2.0),
    "policy server lanes (2x)": ("lanes", 2.0),
    "training (2x faster)": ("train_speedup", 2.0),
    "sandbox and tool time (0.5x)": ("sandbox_x", 0.5),
    "orchestration (0.5x)": ("orchestration_x", 0.5),
    "Ray dispatch (0.5x)": ("dispatch_x", 0.5),
}


def project(ctx: dict[str, Any], seeds: int) -> dict[str, Any]:
    """Print the projection, its breakdown, the sensitivity table and the limiting resource."""
    base = {k: v[0] for k, v in KNOBS.items()}
    runs = [project_once(base, ctx, seed=s) for s in range(seeds)]
    ordered = sorted(runs, key=lambda r: r.makespan_sec)
    res = ordered[len(ordered) // 2]  # the median run's breakdown
    spans = [r.makespan_sec for r in ordered]
    hours = statistics.median(spans) / 3600
    slots = int(base["nodes"]) * ctx["slots_per_node"]
    print(
        f"\n## Projection: {ctx['spec'].tasks:,} tasks x {ctx['spec'].attempts} attempts on "
        f"{int(base['nodes'])} nodes x {ctx['slots_per_node']} slots + 1 GPU training node"
    )
    print(
        f"  {res.trials:,} model trials; wall {hours:.2f} h (median of {seeds} seeds, "
        f"{spans[0] / 3600:.2f}..{spans[-1] / 3600:.2f} h); target <= {TARGET_HOURS:.0f} h: "
        f"{'MET' if hours <= TARGET_HOURS else 'NOT MET'}"
    )
    _breakdown(res, slots, int(base["lanes"]))
    sensitivity = _sensitivity(base, ctx)
    return {"hours": hours, "sensitivity": sensitivity, "headroom": _headroom(base, ctx)}


def _headroom(base: dict[str, float], ctx: dict[str, Any]) -> float:
    """The factor on every trial's seconds (sandbox, tool and model) at which the projection reaches the target.

    A bigger policy model or longer tasks lengthen trials; bisection on a log scale, seed 0.
    """

    def hours(m: float) -> float:
        knobs = {**base, "sandbox_x": base["sandbox_x"] * m, "model_speedup": base["model_speedup"] / m}
        return project_once(knobs, ctx).makespan_sec / 3600

    lo, hi = 1.0, 2.0
    while hours(hi) < TARGET_HOURS and hi < 1e4:
        lo, hi = hi, hi * 4
    for _ in range(10):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if hours(mid) < TARGET_HOURS else (lo, mid)
    print(
        f"  headroom: the projection reaches {TARGET_HOURS:.0f} h when every trial takes about {lo:.0f}x as long "
        "(sandbox, tool and model time alike: a bigger policy model, longer tasks)"
    )
    return lo


def _breakdown(res: SimResult, slots: int, lanes: int) -> None:
    print("  where the time goes (wall seconds per stage, share):")
    for group, sec in res.by_group().items():
        print(f"    {group:<16} {sec:>9,.0f} s  {sec / res.makespan_sec:6.1%}")
    waves = _wave_sec(res)
    print(
        f"  during trial and replay waves ({waves:,.0f} s): sandbox slots {res.slot_busy_sec / (slots * waves):.1%} "
        f"busy; policy-server lanes {res.lane_busy_sec / (lanes * waves):.1%} busy, "
        f"trials waited {res.lane_wait_sec:,.0f} s for a lane; Ray dispatcher "
        f"{res.dispatch_busy_sec / waves:.1%} busy"
    )
    print(f"  training node: {res.training_sec:,.0f} s ({res.training_sec / res.makespan_sec:.1%} of the wall)")


def _sensitivity(base: dict[str, float], ctx: dict[str, Any]) -> dict[str, Any]:
    ref = project_once(base, ctx).makespan_sec
    print(f"  sensitivity (seed 0, base {ref / 3600:.2f} h): hours at 0.5x and 2x of each figure")
    table = {}
    for name, (value, what, _) in KNOBS.items():
        lo = project_once({**base, name: value * 0.5}, ctx).makespan_sec / 3600
        hi = project_once({**base, name: value * 2.0}, ctx).makespan_sec / 3600
        table[name] = (lo, hi)
        print(f"    {name:<20} {value:>8g} -> 0.5x {lo:6.2f} h   2x {hi:6.2f} h   ({what})")
    gains = {}
    for resource, (knob, factor) in RELIEF.items():
        gains[resource] = ref - project_once({**base, knob: base[knob] * factor}, ctx).makespan_sec
    limiter = max(gains, key=lambda r: gains[r])
    print(
        "  relieving each resource 2x shortens the generation by: "
        + "; ".join(f"{r} {g / ref:.1%}" for r, g in sorted(gains.items(), key=lambda kv: -kv[1]))
    )
    print(f"  limiting resource: {limiter}")
    return {"table": table, "limiter": limiter}


def _assumptions(ctx: dict[str, Any], dispatch: dict[str, float], source: str) -> None:
    spec: NightlySpec = ctx["spec"]
    rates: TokenRates = ctx["rates"]
    train = ctx["train"]
    o: Overheads = ctx["overheads"]
    search, selection, sealed = spec.split_sizes()
    print("## Assumptions (measured / derived / ASSUMED)")
    print(f"  measured: trial phase seconds and tokens, resampled per stage, from {source}")
    print(
        f"  derived: agent time = {rates.fixed_sec:.2f} s + completion/{rates.completion_tokens_per_sec:.1f} tok/s"
        f" + prompt/{rates.prompt_tokens_per_sec:.0f} tok/s per request (NNLS over {rates.trials} trials, "
        f"R^2 {rates.r2:.2f}); the token part is model time, the rest tool time in the sandbox"
    )
    print(
        "  measured: llama.cpp serves 2 requests at full speed on this machine (bench_engines: 2.02x at 2): "
        "the check's server has 2 lanes and speed 1"
    )
    if dispatch["n"]:
        print(
            f"  measured: Ray dispatch {dispatch['batch_sec'] * 1e3:.2f} ms a task when {dispatch['n']:.0f} no-op tasks"
            f" go at once (the head's rate, simulated as one task at a time), {dispatch['latency_sec'] * 1e3:.2f} ms"
            " round trip one by one"
        )
    else:
        print(f"  given (--dispatch-sec): Ray dispatch {dispatch['batch_sec'] * 1e3:.2f} ms a task, one at a time")
    print(
        f"  derived from {ctx['train_lineage']}: CPU training {train['cpu_sec_per_token']:.4f} s a trained token "
        f"({train['wall_sec']:.0f} s for {train['tokens']:.0f} tokens), "
        f"{train['tokens_per_sample']:.0f} tokens a sample"
    )
    print(
        f"  derived: orchestration carried over: Discovery {o.discovery_sec:.1f} s, a replay {o.replay_job_sec:.2f}"
        f" slot-s, search finish {o.search_finish_sec:.1f} s, other barriers {o.barrier_sec:.2f} s, gate tail "
        f"{o.gate_sec:.2f} s; ASSUMED not to grow with tasks but for the replays"
    )
    print(
        f"  ASSUMED nightly plan: splits {search} / {selection} / {sealed} (search / selection / sealed, the main "
        f"job's 0.25 fractions); base trials {search} x {spec.attempts}; {spec.replays_per_task} replays a search "
        f"task; search {spec.search_trials_per_task:g} trials a search task in steps of one trial a slot; "
        f"successor check {selection} x {spec.attempts} x {spec.race_pairs} pairs; {spec.iterations} GRPO iterations"
        f" of {spec.tasks_per_iteration} tasks x {spec.group_size}; promotion {selection} x {spec.attempts} x "
        f"{spec.promotion_pairs}; sealed {sealed} x {spec.attempts} x {spec.sealed_pairs} pairs"
    )
    print("  ASSUMED: the same policy model (SmolLM2-135M) and tasks like the measured ones; the store keeps up")
    for name, (value, what, how) in KNOBS.items():
        print(f"  {how}: {name} = {value:g} ({what})")
    peak = min(ctx["slots_per_node"] * KNOBS["nodes"][0], KNOBS["lanes"][0]) * KNOBS["model_speedup"][0]
    print(
        f"  implied peak server throughput: {peak * rates.completion_tokens_per_sec:,.0f} completion tok/s and "
        f"{peak * rates.prompt_tokens_per_sec:,.0f} prompt tok/s (every slot in a model call at once)"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=None, help="SQLite path or SQLAlchemy URL (default: the dev store)")
    ap.add_argument("--lineage", action="append", help="measured lineage(s) to check (default mj4 and bb2)")
    ap.add_argument("--generation", type=int, default=0)
    ap.add_argument("--project-from", default=None, help="lineage whose trials the projection resamples (the first)")
    ap.add_argument("--seeds", type=int, default=50, help="seeds for the check (the projection uses a fifth)")
    ap.add_argument("--ray-address", default="local", help="'local' (a private head started here) or an address")
    ap.add_argument("--ray-tasks", type=int, default=200)
    ap.add_argument("--dispatch-sec", type=float, default=None, help="skip the Ray measurement, use this per task")
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--attempts", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--slots", type=int, default=8, help="sandbox slots per node")
    args = ap.parse_args(argv)
    url = _store_url(args.store) if args.store else _default_store()
    names = args.lineage or ["mj4", "bb2"]
    lineages = {}
    for name in names:
        lineages[name] = read_lineage(url, name, args.generation)
        lineages[name]["source"] = f"{url} lineage {name} generation {args.generation}"
    if args.dispatch_sec is not None:
        dispatch = {"latency_sec": args.dispatch_sec, "batch_sec": args.dispatch_sec, "n": 0.0}
    else:
        dispatch = measure_dispatch(args.ray_address, args.ray_tasks)
    KNOBS["nodes"] = (args.nodes, *KNOBS["nodes"][1:])
    checks = {n: check(n, lin, dispatch["batch_sec"], args.seeds) for n, lin in lineages.items()}
    if len(lineages) > 1:
        print("\n## Cross checks (costs from one lineage, plan and wall of another)")
        for target, lin in lineages.items():
            for source, c in checks.items():
                if source != target:
                    cross_check(target, lin, source, c["pools"], dispatch["batch_sec"], args.seeds)
    base = args.project_from or names[0]
    train_lineage, train = training_cost(lineages)
    ctx = {
        "spec": NightlySpec(tasks=args.tasks, attempts=args.attempts),
        "pools": checks[base]["pools"],
        "rates": checks[base]["rates"],
        "train": train,
        "train_lineage": train_lineage,
        "overheads": overheads_from(checks[base]["plan"], lineages[base], checks[base]["slots"]),
        "slots_per_node": args.slots,
        "dispatch_sec": dispatch["batch_sec"],
    }
    print()
    _assumptions(ctx, dispatch, lineages[base]["source"])
    out = project(ctx, max(1, args.seeds // 5))
    ratios = ", ".join(f"{n} {c['ratio']:.3f}" for n, c in checks.items())
    print(
        f"\nsummary: check ratios (simulated / measured) {ratios}; "
        f"projected nightly {out['hours']:.2f} h (target {TARGET_HOURS:.0f} h; trials may take {out['headroom']:.0f}x "
        f"as long); limiting resource {out['sensitivity']['limiter']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
