"""Benchmark: trials per minute of each trial stage (expansion, search, selection, sealed), from trial records.

Two modes:

- ``--lineage NAME`` reads an existing lineage from the store (``MINDFORGE_DATA_DIR``), e.g.
  the main job's after ``./deploy/main.sh``;
- without it, it runs a short one-generation lineage (Expansion with search, the successor
  race on selection, the sealed lift) through Temporal and a local Ray cluster of
  ``--cpus`` CPUs on the 20 main-job tasks of ``tasks/micro`` (10 search / 5 selection /
  5 sealed), with a SCRIPTED POLICY behind the OpenAI-compatible HTTP API (the one test
  double): under a contract with a skill in its system prompt (search adds skills) it writes
  the task's reference solution, runs it and finishes; under any other it finishes at once.
  Every reply waits ``--delay`` seconds, standing in for generation.

Per stage it prints: trials, the stage's span (first start to last finish, seconds),
trials per minute over that span, the busy time (union of the trials' intervals) and
trials per minute over it, and the mean concurrency (sum of trial durations / busy time).
A stage whose span is much longer than its busy time waited on other work in between
(the promotion gate's selection trials come after the Update's training); the mean
concurrency is what compares stages fairly. Ratios are against the search stage of the
same run. Run on demand: ``.venv/bin/python benchmarks/bench_stage_throughput.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import uuid
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: the system-prompt heading of a contract with skills (an edit of the search space)
SKILLS = "Skills (helper scripts"


def _action(tool: str, delay: float, **arguments) -> dict:
    return {"content": json.dumps({"tool": tool, "arguments": arguments}), "delay_sec": delay}


def _script(model_id: str, tasks: list[Path], delay: float) -> dict:
    """A skill in the system prompt -> write the reference solution, run it, finish; else finish at once."""
    rules = []
    for task in tasks:
        marker = (task / "instruction.md").read_text(encoding="utf-8").strip().splitlines()[0][:40]
        solve = (task / "solution" / "solve.sh").read_text(encoding="utf-8")
        rules.append({
            "match": {"turn": 0, "system_contains": SKILLS, "conversation_contains": [marker]},
            "reply": _action("write_file", delay, path="/tmp/solve.sh", content=solve),
        })
    rules.append({"match": {"system_contains": SKILLS, "last_message_contains": "wrote"},
                  "reply": _action("bash", delay, command="bash /tmp/solve.sh")})
    return {"rules": rules, "default": _action("finish", delay), "base_models": [model_id]}


def stage_rates(records_by_stage: dict[str, list]) -> dict[str, dict[str, float]]:
    """Per stage: ``trials``, ``span_sec``, ``per_min_span``, ``busy_sec``, ``per_min_busy``, ``concurrency``.

    Args:
        records_by_stage: stage -> trial records with ``started_at`` and ``finished_at``.
    """
    out = {}
    for stage, recs in records_by_stage.items():
        spans = sorted((r.started_at.timestamp(), r.finished_at.timestamp()) for r in recs if r.finished_at)
        if not spans:
            continue
        busy, cur_start, cur_end = 0.0, spans[0][0], spans[0][1]
        for start, end in spans[1:]:
            if start > cur_end:
                busy += cur_end - cur_start
                cur_start, cur_end = start, end
            else:
                cur_end = max(cur_end, end)
        busy += cur_end - cur_start
        span = max(e for _, e in spans) - spans[0][0]
        work = sum(e - s for s, e in spans)
        out[stage] = {
            "trials": len(spans), "span_sec": span, "per_min_span": len(spans) / span * 60 if span else 0.0,
            "busy_sec": busy, "per_min_busy": len(spans) / busy * 60 if busy else 0.0,
            "concurrency": work / busy if busy else 0.0, "mean_trial_sec": work / len(spans),
        }
    return out


def read_lineage(name: str) -> dict[str, list]:
    """The lineage's trial records by stage, from the store of ``MINDFORGE_DATA_DIR``."""
    from mindforge.settings import get_settings
    from mindforge.store import engine as se
    from mindforge.store import trials

    by_stage: dict[str, list] = defaultdict(list)
    with se.session_scope(se.init_db(get_settings().db_url)) as s:
        for row in trials.list_trials(session=s, lineage_id=name):
            by_stage[str(row.stage)].append(row.to_record())
    return dict(by_stage)


async def run_lineage(name: str, tasks: list[Path], policy_url: str, db_url: str) -> None:
    """One generation: Expansion with search and the successor race, then the sealed lift."""
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
    from workflows.options import KEY_GENERATION, KEY_LINEAGE, KEY_STAGE, search_attributes

    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(Path(sys.executable).parent / "temporal"),
        search_attributes=[KEY_LINEAGE, KEY_GENERATION, KEY_STAGE], data_converter=pydantic_data_converter,
        dev_server_log_level="error",
    )
    try:
        spec = LineageSpec(
            name=name, tasks=[str(t) for t in tasks], contract_path=str(REPO / "hcp_contracts" / "baseline.toml"),
            stages=[Stage.EXPANSION], runtime=RuntimeSpec(policy_url=policy_url),
            expansion=ExpansionSpec(attempts=2, search=SearchBudgetSpec(max_attempts=48, cells_per_step=8)),
            evaluation=EvaluationSpec(splits=SplitConfig(selection_fraction=0.25, sealed_fraction=0.25, min_tasks=5)),
        )
        warm_up_ray()
        w1, w2 = build_workers(
            env.client, LineageActivities(db_url), ["orchestration", "sandbox"], 5, settings=get_settings()
        )
        async with w1, w2:
            handle = await env.client.start_workflow(
                "LineageWorkflow", LineageInput(lineage_id=name, spec=spec), id=f"lineage-{name}",
                task_queue=ORCHESTRATION_QUEUE, search_attributes=search_attributes(name),
            )
            await handle.result()
    finally:
        await env.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lineage", help="read this lineage from the store instead of running one")
    parser.add_argument("--cpus", type=int, default=2, help="Ray CPUs (trial concurrency) of the run")
    parser.add_argument("--delay", type=float, default=0.5, help="seconds each scripted reply waits")
    args = parser.parse_args()
    if args.lineage:
        by_stage = read_lineage(args.lineage)
    else:
        tmp = Path(tempfile.mkdtemp(prefix="mf-bench-stages-"))
        os.environ["MINDFORGE_DATA_DIR"] = str(tmp)
        import ray

        from mindforge.cli.quickstart import MAIN_JOB_TASKS
        from mindforge.hcp import load_contract
        from mindforge.policy.doubles.scripted import start_scripted_policy
        from mindforge.settings import get_settings
        from workers.main import init_ray

        tasks = [REPO / "tasks" / "micro" / t for t in MAIN_JOB_TASKS]
        model_id = load_contract(REPO / "hcp_contracts" / "baseline.toml").model.id
        name = f"stages-{uuid.uuid4().hex[:6]}"
        with start_scripted_policy(_script(model_id, tasks, args.delay)) as policy:
            os.environ["MINDFORGE_RAY_ADDRESS"] = "local"
            ray.init(address="local", num_cpus=args.cpus, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"MINDFORGE_DATA_DIR": str(tmp)}})
            init_ray("local")
            asyncio.run(run_lineage(name, tasks, policy.base_url, get_settings().db_url))
            ray.shutdown()
        by_stage = read_lineage(name)
        print(f"lineage {name}: scripted policy, {args.delay} s a reply, Ray concurrency {args.cpus}")
    rates = stage_rates(by_stage)
    base = rates.get("search") or rates.get("expansion")
    print(f"{'stage':<10} {'trials':>6} {'span s':>8} {'/min span':>9} {'busy s':>8} {'/min busy':>9} "
          f"{'concurrency':>11} {'s/trial':>7} {'busy ratio vs search':>21}")
    for stage in ("expansion", "search", "rollout", "selection", "sealed"):
        if stage not in rates:
            continue
        r = rates[stage]
        ratio = f"{r['per_min_busy'] / base['per_min_busy']:.2f}x" if base else "-"
        print(f"{stage:<10} {r['trials']:>6} {r['span_sec']:>8.1f} {r['per_min_span']:>9.1f} {r['busy_sec']:>8.1f} "
              f"{r['per_min_busy']:>9.1f} {r['concurrency']:>11.2f} {r['mean_trial_sec']:>7.2f} {ratio:>21}")


if __name__ == "__main__":
    main()
