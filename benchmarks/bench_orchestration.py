"""Benchmark: orchestration overhead of a lineage (Temporal + Ray) against in-process ``eval``.

Same run, same batch: ``--tasks`` bundled tasks x ``--attempts`` trials (20 by default) with
cached images and a scripted policy (answers ``finish`` at once, so the trial is the
sandbox's work). Measured:

1. wall time per trial of ``mindforge.trials.batch.evaluate`` (threads, concurrency 2) and of a
   one-generation lineage (Expansion only) through a Temporal dev server and a local Ray
   cluster with 2 CPUs - ratio lineage / eval (target <= 1.1x);
2. trials per minute through the lineage at Ray concurrency 1 and 2 (``num_cpus``) - ratio
   (target >= 1.7x).

The scripted policy is the test double behind the real HTTP API. Run on demand:
``.venv/bin/python benchmarks/bench_orchestration.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TASKS = ["log-5xx-report", "fix-invoice-totals", "jsonl-to-csv", "regex-ipv4-extract", "site-permissions"]


def _script(model_id: str) -> dict:
    return {
        "rules": [],
        "default": {"content": json.dumps({"tool": "finish", "arguments": {}})},
        "base_models": [model_id],
    }


async def run_lineage(name: str, tasks: list[Path], attempts: int, policy_url: str, db_url: str) -> float:
    """One generation (Expansion's base evaluation, then audit; search off); returns seconds.

    It runs through Temporal and the already initialised Ray.
    """
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.testing import WorkflowEnvironment

    from mindforge.evaluation import SplitConfig
    from mindforge.payloads import (
        ORCHESTRATION_QUEUE,
        EvaluationSpec,
        ExpansionSpec,
        LineageInput,
        LineageSpec,
        RuntimeSpec,
        SearchBudgetSpec,
        Stage,
    )
    from mindforge.settings import get_settings
    from workers.lineage_activities import LineageActivities
    from workers.main import build_workers, warm_up_ray
    from workflows.options import (
        KEY_GENERATION,
        KEY_LINEAGE,
        KEY_STAGE,
        search_attributes,
    )

    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(Path(sys.executable).parent / "temporal"),
        search_attributes=[KEY_LINEAGE, KEY_GENERATION, KEY_STAGE],
        data_converter=pydantic_data_converter,
        dev_server_log_level="error",
    )
    try:
        spec = LineageSpec(
            name=name, tasks=[str(t) for t in tasks], contract_path=str(REPO / "hcp_contracts" / "baseline.toml"),
            stages=[Stage.EXPANSION],
            runtime=RuntimeSpec(policy_url=policy_url, trial_batch_size=len(tasks) * attempts),
            # the same batch as eval: the base evaluation only, no splits
            expansion=ExpansionSpec(attempts=attempts, search=SearchBudgetSpec(enabled=False)),
            evaluation=EvaluationSpec(splits=SplitConfig(selection_fraction=0.0, sealed_fraction=0.0, min_tasks=1)),
        )
        warm_up_ray()  # what `mindforge worker` does at start-up, before it polls
        w1, w2 = build_workers(
            env.client, LineageActivities(db_url), ["orchestration", "sandbox"], 5, settings=get_settings()
        )
        async with w1, w2:
            t0 = time.perf_counter()
            handle = await env.client.start_workflow(
                "LineageWorkflow", LineageInput(lineage_id=name, spec=spec), id=f"lineage-{name}",
                task_queue=ORCHESTRATION_QUEUE, search_attributes=search_attributes(name),
            )
            await handle.result()
            return time.perf_counter() - t0
    finally:
        await env.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=4)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mf-bench-"))
    os.environ["MINDFORGE_DATA_DIR"] = str(tmp)
    import ray

    from mindforge.agent.loop import ModelAgent
    from mindforge.hcp import load_contract
    from mindforge.policy.doubles.scripted import start_scripted_policy
    from mindforge.settings import get_settings
    from mindforge.tasks.loader import load_task
    from mindforge.trials.batch import evaluate
    from mindforge.trials.run import open_engine
    from workers.main import init_ray

    settings = get_settings()
    contract = load_contract(REPO / "hcp_contracts" / "baseline.toml")
    tasks = [load_task(REPO / "tasks" / t) for t in TASKS]
    engine, image_map = open_engine(settings)
    n = len(tasks) * args.attempts
    with start_scripted_policy(_script(contract.model.id)) as policy:
        evaluate(tasks, lambda: ModelAgent(contract, base_url=policy.base_url), engine, attempts=1,
                 artifact_root=settings.artifacts, image_map=image_map, concurrency=2)  # builds images, warms up
        t0 = time.perf_counter()
        evaluate(tasks, lambda: ModelAgent(contract, base_url=policy.base_url), engine, attempts=args.attempts,
                 artifact_root=settings.artifacts, image_map=image_map, concurrency=2)
        eval_sec = time.perf_counter() - t0
        t0 = time.perf_counter()
        evaluate(tasks, lambda: ModelAgent(contract, base_url=policy.base_url), engine, attempts=args.attempts,
                 artifact_root=settings.artifacts, image_map=image_map, concurrency=1)
        eval_1_sec = time.perf_counter() - t0
        results = {}
        for cpus in (2, 1):
            os.environ["MINDFORGE_RAY_ADDRESS"] = "local"
            ray.init(address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"MINDFORGE_DATA_DIR": str(tmp)}})
            init_ray("local")
            results[cpus] = asyncio.run(
                run_lineage(f"bench-{cpus}-{uuid.uuid4().hex[:6]}", [t.path for t in tasks], args.attempts,
                            policy.base_url, settings.db_url)
            )
            ray.shutdown()
    print(f"batch: {n} trials ({len(tasks)} tasks x {args.attempts} attempts), cached images, scripted policy")
    print(f"in-process eval (2 threads):      {eval_sec:7.2f} s  = {eval_sec / n:.3f} s/trial")
    print(f"lineage on Temporal + Ray (2 CPU): {results[2]:7.2f} s  = {results[2] / n:.3f} s/trial")
    print(f"ratio lineage / eval per trial: {results[2] / eval_sec:.2f}x  (target <= 1.10x)")
    tpm = {c: n / results[c] * 60 for c in results}
    print(f"trials/minute through the lineage: concurrency 1 = {tpm[1]:.1f}, concurrency 2 = {tpm[2]:.1f}")
    print(f"ratio concurrency 2 / 1: {tpm[2] / tpm[1]:.2f}x  (target >= 1.70x)")
    print(f"reference, in-process eval with 1 vs 2 threads on this machine: {eval_1_sec / eval_sec:.2f}x")


if __name__ == "__main__":
    main()
