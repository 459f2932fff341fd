"""Benchmark: rollouts per minute of SmolLM2-135M on llama.cpp, and where a trial's time goes.

Real trials - ``run_trial`` with ``ModelAgent`` in Docker sandboxes against the embedded
OpenAI-compatible server on llama.cpp (the main job's engine, 2 slots) - on the search
split of the micro suite (``tasks/micro``, split as ``bench_experience`` splits it), under
two contracts:

- ``json``: the main job's root contract ``hcp_contracts/smollm2.toml`` (JSON actions,
  several turns a trial);
- ``library``: the Update's kind of contract - the ``command`` action format carrying the
  lineage's oracle-seeded experience library, built as ``bench_update`` builds it (one
  command a trial, retrieved examples in the prompt).

Three batches - ``json`` and ``library`` with one trial a task (the pattern of the
search, selection and sealed stages), and ``library`` with ``--group-size`` rollouts of
each task in a row (the pattern of an Update draw: a GRPO group shares its prompt) - each
run at concurrency 1 and then 2 (trials at once) on a server started for it (no batch
reuses another's cache), on two engines: the default (a prompt prefilled on one slot is
copied into the other: :mod:`mindforge.policy.engines.kv_snapshots`) and, as the baseline
measured in the same run, the engine before that change (nothing shared). Per trial it reads the
phase timings of the trial record and, from the transcript's ``reply`` events, what the
engine reports per request (``usage.prompt_tokens_details.cached_tokens`` and the
llama.cpp-style ``timings``) and the agent's HTTP round trip. It prints, per batch:

- rollouts per minute over the batch's wall time;
- the mean trial's seconds split into Docker (build lookup, start, verify, teardown),
  sandbox execution and harness work inside the agent phase, and the model calls; and the
  model calls split into waiting for a slot, prefill, decode, per-token host work
  (logprobs, stop strings) and the rest (HTTP, JSON, tokenizing, chat template);
- prompt tokens per trial computed against reused from the slot's prefix cache, and
  completion tokens;
- the engine's measured prefill and decode rates (tokens per second per slot) and the
  rollouts per minute they allow if generation were the only cost;
- the Docker floor (``benchmarks/bench_trial.py``'s plain ``docker`` CLI trial, no model)
  at the same concurrency, and the ratio of the rollout rate to it.

Targets: at concurrency 2, at least 3x the main job's 12-16 rollouts a minute
and at least 0.5x the Docker floor. Nothing here is tuned on the tasks: they are only
timed. Run on demand (needs the ``llamacpp`` extra and ``mindforge dev up``)::

    .venv/bin/python benchmarks/bench_rollouts.py             # 12 trials a batch, about 10 minutes
    .venv/bin/python benchmarks/bench_rollouts.py --trials 8  # a shorter run
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPO = Path(__file__).resolve().parents[1]
LINEAGE = "bench-rollouts"


@dataclass
class TrialCost:
    """One trial's time (seconds) and tokens, from its record and transcript."""

    docker_sec: float = 0.0
    agent_sec: float = 0.0
    request_sec: float = 0.0
    queue_sec: float = 0.0
    prefill_sec: float = 0.0
    decode_sec: float = 0.0
    host_sec: float = 0.0
    computed_tokens: int = 0
    cached_tokens: int = 0
    shared_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    passed: bool = False


@dataclass
class Batch:
    """One contract's trials at one concurrency."""

    contract: str
    concurrency: int
    wall_sec: float
    costs: list[TrialCost] = field(default_factory=list)

    @property
    def per_minute(self) -> float:
        return len(self.costs) / (self.wall_sec / 60.0)


def trial_cost(record: Any) -> TrialCost:
    """The cost of one finished trial (its ``timings`` and the ``reply`` events of its transcript)."""
    from mindforge.agent.transcript import read_transcript

    t = record.timings
    cost = TrialCost(
        docker_sec=t.build_sec + t.start_sec + t.verify_sec + t.teardown_sec,
        agent_sec=t.agent_sec,
        passed=bool(record.passed),
    )
    path = record.artifacts.get("transcript")
    events = read_transcript(Path(path)) if path and Path(path).is_file() else []
    for ev in events:
        if ev.get("event") != "reply":
            continue
        usage, timings = ev.get("usage") or {}, ev.get("timings") or {}
        cost.requests += 1
        cost.request_sec += float(ev.get("request_sec") or 0.0)
        cost.queue_sec += float(timings.get("queue_ms", 0.0)) / 1000.0
        cost.prefill_sec += float(timings.get("prompt_ms", 0.0)) / 1000.0
        cost.decode_sec += float(timings.get("predicted_ms", 0.0)) / 1000.0
        cost.host_sec += float(timings.get("host_ms", 0.0)) / 1000.0
        cached = int(usage.get("cached_tokens") or 0)
        cost.cached_tokens += cached
        cost.shared_tokens += int(timings.get("shared_n", 0))
        cost.computed_tokens += int(usage.get("prompt_tokens") or 0) - cached
        cost.completion_tokens += int(usage.get("completion_tokens") or 0)
    return cost


def _mean(xs: Iterable[float]) -> float:
    xs = list(xs)
    return statistics.fmean(xs) if xs else 0.0


def describe(batch: Batch, floor_per_minute: float) -> list[str]:
    """The printed lines of one batch."""
    c = batch.costs
    docker, agent = _mean(x.docker_sec for x in c), _mean(x.agent_sec for x in c)
    request = _mean(x.request_sec for x in c)
    queue, prefill = _mean(x.queue_sec for x in c), _mean(x.prefill_sec for x in c)
    decode, host = _mean(x.decode_sec for x in c), _mean(x.host_sec for x in c)
    rest = request - queue - prefill - decode
    computed, cached = _mean(x.computed_tokens for x in c), _mean(x.cached_tokens for x in c)
    completion = _mean(x.completion_tokens for x in c)
    prefill_rate = sum(x.computed_tokens for x in c) / max(sum(x.prefill_sec for x in c), 1e-9)
    decode_rate = sum(x.completion_tokens for x in c) / max(sum(x.decode_sec for x in c), 1e-9)
    engine_sec = computed / prefill_rate + completion / decode_rate if prefill_rate and decode_rate else 0.0
    limit = 60.0 * batch.concurrency / engine_sec if engine_sec else float("inf")
    passed = sum(x.passed for x in c)
    return [
        f"{batch.contract}, concurrency {batch.concurrency}: {len(c)} trials ({passed} passed) in "
        f"{batch.wall_sec:.0f} s = {batch.per_minute:.1f} rollouts/min; Docker floor {floor_per_minute:.1f}/min "
        f"(ratio {batch.per_minute / floor_per_minute:.2f}x)",
        f"  mean trial {docker + agent:.2f} s: Docker {docker:.2f} s, model calls {request:.2f} s "
        f"({_mean(x.requests for x in c):.1f} calls), sandbox exec + harness {agent - request:.2f} s",
        f"  model calls: slot wait {queue:.2f} s, prefill {prefill:.2f} s, decode {decode - host:.2f} s, "
        f"per-token host work {host:.2f} s, HTTP/JSON/template {rest:.2f} s",
        f"  prompt tokens a trial: {computed:.0f} computed + {cached:.0f} reused from the prefix cache "
        f"({cached / max(cached + computed, 1e-9):.0%} reused, {_mean(x.shared_tokens for x in c):.0f} of them "
        f"copied from the other slot); completion tokens {completion:.0f}",
        f"  engine per slot: prefill {prefill_rate:.0f} tok/s, decode {decode_rate:.0f} tok/s; generation alone "
        f"would allow {limit:.1f} rollouts/min at this concurrency",
    ]


def library_contract(out_dir: Path, base_url: str) -> tuple[Any, str]:
    """The ``command`` contract with the oracle-seeded library of this benchmark's search split."""
    from benchmarks.bench_update import library_contract as build
    from mindforge.hcp import load_contract

    path, summary = build(LINEAGE, out_dir, base_url)
    return load_contract(path), summary


def run_batch(base_url: str, artifacts: Path, contract: Any, label: str, tasks: list[Any], workers: int) -> Batch:
    """Run one trial of each task with ``workers`` at once; returns the batch with every trial's cost."""
    from benchmarks.bench_real_model import Runner

    runner = Runner(base_url, artifacts, workers=workers)
    try:
        slug = "-".join("".join(ch if ch.isalnum() else " " for ch in label).split())
        jobs = [(t, contract, f"{slug}/c{workers}/{t.id}/{i}", i) for i, t in enumerate(tasks)]
        started = time.perf_counter()
        records = runner.run(jobs, run_id=f"{LINEAGE}-c{workers}-{int(started)}")
        wall = time.perf_counter() - started
    finally:
        runner.pool.shutdown()
    return Batch(label, workers, wall, [trial_cost(r) for r in records])


def serve(before: bool) -> Any:
    """A cold embedded server on SmolLM2's GGUF: the engine's defaults, or ``before`` them.

    ``before`` is the engine as it was before continuous batching: two single-threaded
    slots (:class:`benchmarks.baseline_engines.SlotEngine`).
    """
    from benchmarks.baseline_engines import SlotEngine
    from mindforge.policy.engines.llamacpp_engine import LlamaCppEngine
    from mindforge.policy.engines.models import resolve_model
    from mindforge.policy.server.runner import ServerHandle
    from mindforge.policy.server.server import create_app

    resolved = resolve_model("smollm2")
    engine: Any = (
        SlotEngine(str(resolved.gguf_path), served_name=resolved.name, slots=2)
        if before
        else LlamaCppEngine(str(resolved.gguf_path), served_name=resolved.name)
    )
    return ServerHandle(create_app(engine))


def cold_batch(before: bool, artifacts: Path, contract: Any, label: str, tasks: list[Any], workers: int) -> Batch:
    """:func:`run_batch` on a server started for it, so no batch reuses another's cache."""
    server = serve(before)
    try:
        return run_batch(server.base_url, artifacts, contract, label, tasks, workers)
    finally:
        server.stop()
        server.app.state.engine.close()


def main(argv: list[str] | None = None) -> int:
    from benchmarks.bench_experience import split_suite
    from benchmarks.bench_update import docker_floor_per_minute
    from mindforge.hcp import load_contract
    from mindforge.settings import get_settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=12, help="trials per batch")
    parser.add_argument("--group-size", type=int, default=4, help="rollouts per task in the Update's pattern")
    args = parser.parse_args(argv)

    t0 = time.monotonic()
    search = split_suite(key=LINEAGE)["search"]
    tasks = search[: args.trials]
    grouped = [t for t in search[: max(1, args.trials // args.group_size)] for _ in range(args.group_size)]
    floors = {c: docker_floor_per_minute(trials=8, workers=c) for c in (1, 2)}
    artifacts = get_settings().artifacts / "bench_rollouts"
    batches: dict[str, list[Batch]] = {}
    summary = ""
    # the product's engine first, then the engine as it was, the baseline measured in the same run
    settings = {"default (prompts shared between slots)": False, "before (nothing shared)": True}
    with tempfile.TemporaryDirectory() as tmp:
        contracts: dict[str, Any] = {"json": load_contract(REPO / "hcp_contracts" / "smollm2.toml")}
        warm = serve(True)
        try:
            contracts["library"], summary = library_contract(Path(tmp), warm.base_url)
            run_batch(warm.base_url, artifacts, contracts["json"], "warmup", tasks[:2], 2)
        finally:
            warm.stop()
            warm.app.state.engine.close()
        runs = [
            ("json", contracts["json"], tasks),
            ("library", contracts["library"], tasks),
            (f"library, {args.group_size} rollouts a task", contracts["library"], grouped),
        ]
        for setting, before in settings.items():
            batches[setting] = [
                cold_batch(before, artifacts, contract, label, jobs, workers)
                for label, contract, jobs in runs
                for workers in (1, 2)
            ]

    print("\n=== bench_rollouts (SmolLM2-135M-Instruct on llama.cpp, 2 slots, tasks/micro search split) ===")
    print(f"library contract: {summary}")
    for setting, rows in batches.items():
        print(f"\n--- engine: {setting}")
        for batch in rows:
            print("\n".join(describe(batch, floors[batch.concurrency])))
    new, old = batches.values()
    print(
        "\nrollouts/min at concurrency 2, default engine vs before (ratio); against the main job's 12-16 "
        "(target >= 3x) and the Docker floor (target >= 0.5x):"
    )
    for a, b in zip(new, old, strict=True):
        if a.concurrency == 2:
            print(
                f"  {a.contract}: {a.per_minute:.1f} vs {b.per_minute:.1f} ({a.per_minute / b.per_minute:.2f}x); "
                f"{a.per_minute / 14:.2f}x the main job's, {a.per_minute / floors[2]:.2f}x the floor"
            )
    print(f"wall time {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
