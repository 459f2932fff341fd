"""Benchmark: one image per family - a trial on a family instance, and validating a pool of 200 instances.

Family instances share their family's image and make their data when the sandbox starts
(``mindforge/tasks/dockerfile.py``, ``mindforge/sandbox/instance.py``). Two measurements,
each against a baseline of the same run:

(a) **A trial.** The median wall time of an oracle trial
    (:func:`mindforge.trials.run.run_trial` with the oracle agent) on a family instance
    (``--family``'s example; its generator runs at start) against one on a bundled micro
    task (``tasks/micro/<--micro>``, whose image holds its data), interleaved, after one
    warm-up each; target ratio <= 1.1. A third side, the same instance built the old way
    (its whole Dockerfile as its own image), shows what the instance steps cost by
    themselves. Medians of the phases (start with the instance steps, the steps alone,
    agent, verifier) are printed too.
(b) **A pool.** ``--pool`` instances (default 200) drawn over the bundled families
    (:func:`mindforge.discovery.sampling.sample_pool`), written as task directories and
    validated (:func:`mindforge.discovery.family_pool.validate_instances`: nop once and the
    oracle twice, each in a fresh sandbox, ``--workers`` tasks at once). The family images are
    built first, untimed (their build time is printed apart); then drawing, writing,
    loading and validating are timed together; target < 120 s. It prints the verdicts,
    trials per second, and how many images the engine holds for the pool: family images
    (target: one per family, 14) and per-instance images (target: 0).

Run on demand, from the repository root, with the dev stack up::

    .venv/bin/python -m benchmarks.bench_family_pool
    .venv/bin/python -m benchmarks.bench_family_pool --trials 15 --pool 200 --workers 4
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

import docker.errors

from mindforge.agent.simple import OracleAgent
from mindforge.discovery.families import load_families
from mindforge.discovery.family_pool import materialise_instances, validate_instances
from mindforge.discovery.materialise import materialise
from mindforge.discovery.sampling import sample_pool
from mindforge.sandbox.docker import DockerEngine
from mindforge.settings import REPO_ROOT, get_settings
from mindforge.tasks.image_map import ImageMap
from mindforge.tasks.loader import load_task
from mindforge.tasks.model import Task
from mindforge.trials.record import TrialRecord
from mindforge.trials.run import open_engine, run_trial


def _median(records: list[TrialRecord], phase: str) -> float:
    return statistics.median(getattr(r.timings, phase) for r in records)


def trial_ratio(engine: DockerEngine, image_map: ImageMap | None, tmp: Path, args: argparse.Namespace) -> None:
    """(a): oracle trials on a family instance, the same instance the old way, and a micro task."""
    family = load_families()[args.family]
    instance = load_task(materialise(family.render(family.example), tmp / "a",
                                     metadata={"family": family.name, "family_params": family.example}))
    # the old way: the same files, the whole Dockerfile built as the instance's own image
    old = instance.model_copy(update={"instance_steps": (), "shared_dockerfile": "", "env_hash": ""})
    micro = load_task(REPO_ROOT / "tasks" / "micro" / args.micro)
    sides: dict[str, Task] = {"family instance": instance, "same, old way": old, f"micro {args.micro}": micro}
    for task in sides.values():
        engine.build_image(task, image_map=image_map)
    wall: dict[str, list[float]] = {name: [] for name in sides}
    recs: dict[str, list[TrialRecord]] = {name: [] for name in sides}
    try:
        for i in range(args.trials + 1):  # the first round is a warm-up
            for name, task in sides.items():
                t0 = time.perf_counter()
                rec = run_trial(task, OracleAgent(), engine, run_id="bench-family-pool", trial_id=f"{name}-{i}",
                                artifact_root=tmp / "art", image_map=image_map)
                took = time.perf_counter() - t0
                assert rec.reward == 1.0, (name, rec.failure_class, rec.failure_detail)
                if i:
                    wall[name].append(took)
                    recs[name].append(rec)
    finally:
        try:
            engine.client.api.remove_image(old.image_tag, force=True)
        except docker.errors.ImageNotFound:
            pass
    print(f"(a) oracle trials per side: {args.trials} (interleaved, after one warm-up); family {args.family}")
    for name in sides:
        r = recs[name]
        print(f"  {name:22s} median {statistics.median(wall[name]):.3f} s (min {min(wall[name]):.3f}, "
              f"max {max(wall[name]):.3f}); start {_median(r, 'start_sec'):.3f} (instance steps "
              f"{_median(r, 'instance_steps_sec'):.3f}), agent {_median(r, 'agent_sec'):.3f}, "
              f"verify {_median(r, 'verify_sec'):.3f}")
    fam, base = statistics.median(wall["family instance"]), statistics.median(wall[f"micro {args.micro}"])
    print(f"  ratio family instance / micro task: {fam / base:.2f}x  (target <= 1.10x)")
    print(f"  ratio family instance / same instance, old way: {fam / statistics.median(wall['same, old way']):.2f}x")


def family_image_count(engine: DockerEngine, tasks: list[Task]) -> tuple[int, int]:
    """(family images labelled for ``tasks``' families and env hashes, per-instance images of ``tasks``)."""
    wanted = {(t.family, t.env_hash) for t in tasks}
    found = engine.client.api.images(filters={"label": "mindforge.family"})
    families = sum(
        1 for img in found
        if ((img.get("Labels") or {}).get("mindforge.family"), (img.get("Labels") or {}).get("mindforge.env_hash"))
        in wanted
    )
    per_instance = 0
    for task in tasks:
        try:
            engine.client.api.inspect_image(task.image_tag)
            per_instance += 1
        except docker.errors.ImageNotFound:
            pass
    return families, per_instance


def pool_validation(engine: DockerEngine, image_map: ImageMap | None, tmp: Path, args: argparse.Namespace) -> None:
    """(b): build the family images (untimed), then draw, write, load and validate the pool (timed)."""
    families = load_families()
    t0 = time.perf_counter()
    examples = [load_task(materialise(f.render(f.example), tmp / "examples", metadata={"family": f.name}))
                for f in families.values()]
    built = [engine.build_image(t, image_map=image_map) for t in examples]
    build_sec = time.perf_counter() - t0
    print(f"(b) family images: {len(built)} ({sum(not b.cached for b in built)} built now, the rest cached) "
          f"in {build_sec:.1f} s (untimed below)")
    t0 = time.perf_counter()
    samples = sample_pool(families, args.pool, seed=args.seed)
    dirs = [d for name, s in samples.items()
            for d in materialise_instances(families[name], s.instances, tmp / "pool")]
    tasks = [load_task(d) for d in dirs]
    written = time.perf_counter() - t0
    results = validate_instances(tasks, engine, artifact_root=tmp / "art", image_map=image_map,
                                 workers=args.workers, families=families)
    took = time.perf_counter() - t0
    trials = sum(len(r.trials) for r in results)
    verdicts = Counter(r.verdict.value for r in results)
    print(f"  pool: {len(tasks)} instances over {len(samples)} families "
          f"({sum(len(s.warnings) for s in samples.values())} sampling warnings)")
    print(f"  drawn, written and loaded in {written:.1f} s; validated, all told, in {took:.1f} s "
          f"with {args.workers} workers  (target < 120 s)")
    spans = [r.timings.total_sec for v in results for r in v.trials]
    print(f"  verdicts: {dict(verdicts)}; {trials} trials, {trials / (took - written):.2f} trials/s; a trial's "
          f"median {statistics.median(spans):.2f} s, {sum(spans) / (took - written):.1f} trials at once on average")
    for r in results:
        if not r.ok:
            print(f"    {r.task_id}: {r.verdict.value}: {'; '.join(r.reasons)[:300]}")
    fam_images, per_instance = family_image_count(engine, tasks)
    print(f"  images the engine holds for the pool: {fam_images} family images (target {len(families)}), "
          f"{per_instance} per-instance images (target 0)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--trials", type=int, default=15, help="timed trials per side in (a)")
    parser.add_argument("--family", default="sum-by-key", help="the family whose example (a) runs")
    parser.add_argument("--micro", default="count-lines", help="the micro task (a) compares with")
    parser.add_argument("--pool", type=int, default=200, help="instances validated in (b)")
    parser.add_argument("--workers", type=int, default=4, help="tasks validated at once in (b)")
    parser.add_argument("--seed", type=int, default=0, help="the pool's draw")
    parser.add_argument("--skip", choices=("a", "b"), help="leave one measurement out")
    args = parser.parse_args()
    engine, image_map = open_engine(get_settings())
    with tempfile.TemporaryDirectory(prefix="bench-family-pool-") as tmp:
        if args.skip != "a":
            trial_ratio(engine, image_map, Path(tmp), args)
        if args.skip != "b":
            pool_validation(engine, image_map, Path(tmp), args)


if __name__ == "__main__":
    main()
