"""Parts of ``benchmarks/bench_rollouts.py``: rate and interval arithmetic, trial costs, the task set, the servers.

- **Arithmetic** (pure): rollouts a minute over the union of trial intervals (as
  ``../shared/tools/stage_rates.py`` counts a stage), the rollouts a minute the model
  allows a trial of given tokens at given tokens a second, a stage's ceiling (the lower of
  that and the Docker floor), and the paired difference of two arms by task
  (:func:`mindforge.evaluation.bootstrap_lift`, the product's cluster bootstrap).
- **Trial costs**: a finished trial's time and tokens from its record and the ``reply``
  events of its transcript (:func:`trial_cost`).
- **The task set**: instances of the benchmark-only task families under
  ``benchmarks/families`` (never bundled tasks: any of those can be a lineage's sealed
  task), drawn with the product's sampler (:func:`mindforge.discovery.sampling.sample_pool`,
  seeded), written as tasks and validated as the product validates instances
  (:func:`mindforge.discovery.family_pool.validate_instances`: builds, the oracle passes
  twice, nop fails).
- **Servers**: the scripted policy that answers with each task's reference solution (the
  Docker floor; the one allowed test double), and ``python -m benchmarks.rollout_parts``,
  which serves :class:`benchmarks.baseline_engines.SlotEngine` (the engine before batching)
  behind the product's OpenAI-compatible app, as ``python -m mindforge.policy.server`` serves
  the product's engine, so every arm's model runs in its own process, as in the main job.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPO = Path(__file__).resolve().parents[1]
#: the benchmark-only task families (tests/unit/benchmarks checks they are not under tasks/)
FAMILIES = REPO / "benchmarks" / "families"
#: keys the trials' sampling seeds and names the library's lineage
LINEAGE = "bench-rollouts"
#: the seed of the draw of the task set
DRAW_SEED = 42


# ---------------------------------------------------------------------------------------- arithmetic


def active_seconds(spans: Iterable[tuple[float, float]]) -> float:
    """Seconds covered by the union of ``[start, end]`` intervals (seconds), so gaps between them do not count.

    Raises:
        ValueError: an interval that ends before it starts.
    """
    total, cur = 0.0, None
    for start, end in sorted(spans):
        if end < start:
            raise ValueError(f"interval ends before it starts: {start} > {end}")
        if cur is None or start > cur[1]:
            total += 0.0 if cur is None else cur[1] - cur[0]
            cur = [start, end]
        else:
            cur[1] = max(cur[1], end)
    return total + (0.0 if cur is None else cur[1] - cur[0])


def per_minute(trials: int, seconds: float) -> float:
    """``trials`` over ``seconds``, a minute; 0.0 for no time."""
    return 60.0 * trials / seconds if seconds > 0 else 0.0


def model_per_minute(computed_tokens: float, completion_tokens: float, prefill_tps: float, decode_tps: float) -> float:
    """Rollouts a minute the model allows, when a trial computes this many tokens and nothing else costs.

    Args:
        computed_tokens: prompt tokens a trial computes (not reused from a KV cache).
        completion_tokens: tokens a trial decodes.
        prefill_tps / decode_tps: the whole machine's tokens a second at full batch.

    Returns:
        ``60 / (computed / prefill_tps + completion / decode_tps)``; ``inf`` for a trial of no tokens.

    Raises:
        ValueError: a rate that is not positive while its tokens are.
    """
    if (computed_tokens > 0 and prefill_tps <= 0) or (completion_tokens > 0 and decode_tps <= 0):
        raise ValueError(f"need positive rates for tokens: {prefill_tps}, {decode_tps}")
    seconds = (computed_tokens / prefill_tps if computed_tokens else 0.0) + (
        completion_tokens / decode_tps if completion_tokens else 0.0
    )
    return 60.0 / seconds if seconds > 0 else math.inf


def ceiling(floor_per_minute: float, model_allows: float) -> float:
    """A stage's ceiling: the lower of the Docker floor and what the model allows its trials (rollouts a minute)."""
    return min(floor_per_minute, model_allows)


def shared_core_bound(floor_per_minute: float, model_allows: float) -> float:
    """Rollouts a minute if Docker and the model each need the whole machine while they run.

    The floor and the model's rate are each measured with all cores to themselves; on one
    machine a trial's sandbox work and its model work take turns on the same cores, so a
    trial costs the sum of both times: ``1 / (1 / floor + 1 / model)``. The true ceiling lies
    between this and :func:`ceiling` (perfect overlap of the two).

    Raises:
        ValueError: a rate that is not positive.
    """
    if floor_per_minute <= 0 or model_allows <= 0:
        raise ValueError(f"need positive rates: floor {floor_per_minute}, model {model_allows}")
    return 1.0 / (1.0 / floor_per_minute + 1.0 / model_allows)


def rate_text(successes: int, n: int) -> str:
    """``k/n = rate [lo, hi]`` with the Wilson 95% interval (Wilson 1927)."""
    from mindforge.evaluation import wilson_interval

    w = wilson_interval(successes, n)
    return f"{successes}/{n} = {w.rate:.2f} [{w.lo:.2f}, {w.hi:.2f}]"


def paired_difference(before: dict[str, list[float]], after: dict[str, list[float]]) -> tuple[float, float, float, int]:
    """Mean per-task difference ``after - before`` with a 95% interval paired by task (cluster bootstrap).

    Args:
        before / after: task -> rewards of its trials in each arm; only tasks in both count.

    Returns:
        ``(mean difference, lower bound, upper bound, tasks)``.

    Raises:
        ValueError: no task in both arms.
    """
    from mindforge.evaluation import bootstrap_lift

    tasks = sorted(set(before) & set(after))
    if not tasks or any(not before[t] or not after[t] for t in tasks):
        raise ValueError("no task has trials in both arms")
    mean, lo, hi = bootstrap_lift(
        [statistics.fmean(before[t]) for t in tasks], [statistics.fmean(after[t]) for t in tasks], n=4000, seed=0
    )
    return mean, lo, hi, len(tasks)


# ---------------------------------------------------------------------------------------- trial costs


@dataclass
class TrialCost:
    """One trial's time (seconds) and tokens, from its record and transcript."""

    docker_sec: float = 0.0
    agent_sec: float = 0.0
    request_sec: float = 0.0
    queue_sec: float = 0.0
    prefill_sec: float = 0.0
    decode_sec: float = 0.0
    computed_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    transcript: bool = False


def trial_cost(record: Any) -> TrialCost:
    """The cost of one finished trial (its ``timings`` and the ``reply`` events of its transcript)."""
    from mindforge.agent.transcript import read_transcript

    t = record.timings
    cost = TrialCost(docker_sec=t.build_sec + t.start_sec + t.verify_sec + t.teardown_sec, agent_sec=t.agent_sec)
    path = record.artifacts.get("transcript")
    cost.transcript = bool(path) and Path(path).is_file()
    for ev in read_transcript(Path(path)) if cost.transcript else []:
        if ev.get("event") != "reply":
            continue
        usage, timings = ev.get("usage") or {}, ev.get("timings") or {}
        cost.requests += 1
        cost.request_sec += float(ev.get("request_sec") or 0.0)
        cost.queue_sec += float(timings.get("queue_ms", 0.0)) / 1000.0
        cost.prefill_sec += float(timings.get("prompt_ms", 0.0)) / 1000.0
        cost.decode_sec += float(timings.get("predicted_ms", 0.0)) / 1000.0
        cached = int(usage.get("cached_tokens") or 0)
        cost.cached_tokens += cached
        cost.computed_tokens += int(usage.get("prompt_tokens") or 0) - cached
        cost.completion_tokens += int(usage.get("completion_tokens") or 0)
    return cost


@dataclass
class Batch:
    """Trials of one contract run together: their records, costs and the wall time (seconds)."""

    label: str
    workers: int
    wall_sec: float
    records: list[Any] = field(default_factory=list)
    costs: list[TrialCost] = field(default_factory=list)

    @property
    def per_minute(self) -> float:
        """Rollouts a minute over the batch's wall time."""
        return per_minute(len(self.records), self.wall_sec)

    def mean(self, name: str) -> float:
        """The mean of a :class:`TrialCost` field over the trials."""
        return statistics.fmean(getattr(c, name) for c in self.costs) if self.costs else 0.0

    def rewards(self) -> dict[str, list[float]]:
        """Task hash -> rewards of its trials with a real reward."""
        out: dict[str, list[float]] = {}
        for r in self.records:
            if r.has_real_reward:
                out.setdefault(r.task_hash, []).append(float(r.reward or 0.0))
        return out


# ---------------------------------------------------------------------------------------- the task set


def draw_task_set(out_dir: Path, fixed: int, search: int, seed: int = DRAW_SEED) -> tuple[list[Any], list[Any]]:
    """Draw, write and load the fixed set and the search side, disjoint, from the benchmark's families.

    Args:
        out_dir: where the task folders go (``fixed/`` and ``search/``; made fresh).
        fixed / search: instances in each (shared over the families as evenly as they allow).
        seed: the draw's seed.

    Returns:
        ``(fixed tasks, search tasks)``, loaded.
    """
    from mindforge.discovery.families import load_families
    from mindforge.discovery.family_pool import materialise_instances
    from mindforge.discovery.sampling import sample_pool
    from mindforge.tasks.loader import load_task

    families = load_families(FAMILIES)
    first = sample_pool(families, fixed, seed=seed)
    taken = {i.instance_id for s in first.values() for i in s.instances}
    second = sample_pool(families, search, seed=seed, exclude=taken)
    sides = []
    for name, drawn in (("fixed", first), ("search", second)):
        paths = [p for fam, s in drawn.items()
                 for p in materialise_instances(families[fam], s.instances, out_dir / name)]
        sides.append([load_task(p) for p in paths])
    return sides[0], sides[1]


def validate_task_set(tasks: list[Any], runner: Any) -> None:
    """Validate instances as the product does (builds, oracle twice, nop) on ``runner``'s Docker engine.

    Raises:
        SystemExit: an instance is not valid (the reasons name the family file at fault).
    """
    from mindforge.discovery.families import load_families
    from mindforge.discovery.family_pool import validate_instances
    from mindforge.trials.validate import Verdict

    results = validate_instances(
        tasks, runner.engine, artifact_root=runner.artifact_root / "validate", image_map=runner.image_map,
        workers=4, families=load_families(FAMILIES),
    )
    bad = [f"{t.id}: {r.verdict.value}: {'; '.join(r.reasons)}" for t, r in zip(tasks, results, strict=True)
           if r.verdict != Verdict.VALID]
    if bad:
        raise SystemExit("benchmark task instances that do not validate:\n" + "\n".join(bad))


def run_seeded(
    runner: Any, base_url: str, contract: Any, tasks: list[Any], label: str, workers: int, attempts: int = 1
) -> Batch:
    """Run ``attempts`` trials of each task under ``contract``, ``workers`` at once, on ``runner``'s Docker engine.

    Every trial's sampling seed is keyed by the benchmark, the task and the attempt only
    (:func:`mindforge.trials.seeds.paired_seed`), so every arm runs the same trials.

    Returns:
        the batch, its wall time from the first start to the last finish.
    """
    from concurrent.futures import ThreadPoolExecutor

    from mindforge.agent.loop import ModelAgent
    from mindforge.trials.run import run_trial
    from mindforge.trials.seeds import paired_seed

    slug = "-".join("".join(ch if ch.isalnum() else " " for ch in label).split())
    run_id = f"{LINEAGE}-{slug}-{int(time.time())}"

    def one(job: tuple[Any, int]) -> Any:
        task, attempt = job
        agent = ModelAgent(contract, base_url=base_url, seed=paired_seed(LINEAGE, "sealed", task.content_hash, attempt))
        return run_trial(task, agent, runner.engine, run_id=run_id, trial_id=f"{task.id}/{attempt}",
                         artifact_root=runner.artifact_root, attempt=attempt, image_map=runner.image_map)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        records = list(pool.map(one, [(t, a) for t in tasks for a in range(attempts)]))
    wall = time.perf_counter() - started
    return Batch(label, workers, wall, records, [trial_cost(r) for r in records])


# ---------------------------------------------------------------------------------------- servers


def floor_script(tasks: list[Any], model_id: str) -> dict[str, Any]:
    """A scripted policy for a JSON-action contract: the task's reference solution as one ``bash`` action, then finish.

    A task is recognised by its instruction in the conversation; replies come at once.
    """
    import json

    from mindforge.experience import solution_commands

    rules = []
    for task in tasks:
        solve = (Path(task.path) / "solution" / "solve.sh").read_text(encoding="utf-8")
        command = "\n".join(solution_commands(solve))
        rules.append({
            "match": {"turn": 0, "conversation_contains": [task.instruction.strip()]},
            "reply": {"content": json.dumps({"tool": "bash", "arguments": {"command": command}})},
        })
    finish = {"content": json.dumps({"tool": "finish", "arguments": {}})}
    return {"rules": rules, "default": finish, "base_models": [model_id]}


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.rollout_parts [--early-stop] [--slots N] --host H --port P``: serve the slot engine.

    The baseline :class:`benchmarks.baseline_engines.SlotEngine` on SmolLM2's GGUF behind
    the product's OpenAI-compatible app (the API key, if any, from settings).
    """
    import argparse

    from benchmarks.baseline_engines import SlotEngine
    from mindforge.policy.engines.models import resolve_model
    from mindforge.policy.server.auth import settings_key
    from mindforge.policy.server.runner import serve_app
    from mindforge.policy.server.server import create_app

    parser = argparse.ArgumentParser(prog="python -m benchmarks.rollout_parts")
    parser.add_argument("--early-stop", action="store_true", help="end replies at their first action")
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    ns = parser.parse_args(argv)
    resolved = resolve_model("smollm2")
    engine = SlotEngine(
        str(resolved.gguf_path), served_name=resolved.name, slots=ns.slots, stop_at_action=ns.early_stop
    )
    serve_app(create_app(engine), ns.host, ns.port, settings_key(), log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
