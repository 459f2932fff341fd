"""Whole lineages on the real stack: Temporal dev server, two-node Ray cluster, Docker, SQLite (one on Postgres too).

The policy is a SCRIPTED POLICY behind the OpenAI-compatible HTTP API (the one allowed
test double); every other part is real.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from mindforge.evaluation import PoolSplit, SplitCandidate, SplitConfig, assign_splits
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
from mindforge.policy.doubles.scripted import start_scripted_policy
from mindforge.store import engine as se
from mindforge.store import lineages, pool, trials
from tests.conftest import BUNDLED_TASKS, REPO
from tests.e2e.conftest import worker_env
from tests.e2e.histories import HISTORY_DIR, expected_files, save_histories
from tests.postgres import fresh_database

pytestmark = [pytest.mark.docker, pytest.mark.temporal, pytest.mark.ray, pytest.mark.slow]

TASKS = ["log-5xx-report", "fix-invoice-totals", "c-stats-make"]
CONTRACT = REPO / "hcp_contracts" / "baseline.toml"


def _finish_script(model_id: str, delay_sec: float = 0.0) -> dict:
    finish = json.dumps({"tool": "finish", "arguments": {}})
    return {"rules": [], "default": {"content": finish, "delay_sec": delay_sec}, "base_models": [model_id]}


@pytest.fixture(scope="module")
def policy():
    from mindforge.hcp import load_contract

    with start_scripted_policy(_finish_script(load_contract(CONTRACT).model.id)) as server:
        yield server


#: these lineages have no selection or sealed split unless a test asks for one
NO_SPLITS = SplitConfig(selection_fraction=0.0, sealed_fraction=0.0, min_tasks=1)


def _spec(
    name: str,
    policy_url: str,
    *,
    generations: int = 1,
    attempts: int = 2,
    trial_batch_size: int = 16,
    heartbeat_timeout_sec: float = 60.0,
    search: SearchBudgetSpec | None = None,
    splits: SplitConfig = NO_SPLITS,
) -> LineageSpec:
    """An Expansion-only lineage on :data:`TASKS` (search off unless given: these tests are about orchestration)."""
    return LineageSpec(
        name=name,
        tasks=[str(BUNDLED_TASKS / t) for t in TASKS],
        contract_path=str(CONTRACT),
        generations=generations,
        stages=[Stage.EXPANSION],
        runtime=RuntimeSpec(
            policy_url=policy_url, trial_batch_size=trial_batch_size, heartbeat_timeout_sec=heartbeat_timeout_sec
        ),
        expansion=ExpansionSpec(attempts=attempts, search=search or SearchBudgetSpec(enabled=False)),
        evaluation=EvaluationSpec(splits=splits),
    )


def _stored(settings, lineage_id: str):
    eng = se.init_db(settings.db_url)
    with se.session_scope(eng) as s:
        rows = trials.list_trials(session=s, lineage_id=lineage_id)
        gens = lineages.list_generations(session=s, lineage_id=lineage_id)
        lin = lineages.get_lineage(session=s, lineage_id=lineage_id)
        return (
            [r.to_record() for r in rows],
            [(g.index, str(g.status), list(g.stages_run), dict(g.record)) for g in gens],
            str(lin.status) if lin else None,
        )


async def _run_in_process(env, settings, spec: LineageSpec):
    from workers.lineage_activities import LineageActivities
    from workers.main import build_workers
    from workflows.options import search_attributes

    acts = LineageActivities(settings.db_url)
    w_orch, w_sand = build_workers(env.client, acts, ["orchestration", "sandbox"], 5, settings=settings)
    async with w_orch, w_sand:
        handle = await env.client.start_workflow(
            "LineageWorkflow",
            LineageInput(lineage_id=spec.name, spec=spec),
            id=f"lineage-{spec.name}",
            task_queue=ORCHESTRATION_QUEUE,
            search_attributes=search_attributes(spec.name),
        )
        result = await handle.result()
        found = [w.id async for w in env.client.list_workflows(f'MindForgeLineage = "{spec.name}"')]
        return result, found


@pytest.fixture(params=["sqlite", "postgres"])
def store_settings(request, settings):
    """The session's settings, with the store on its SQLite file or on a fresh Postgres database (tests/postgres.py)."""
    if request.param == "sqlite":
        yield settings
        return
    with fresh_database(request.getfixturevalue("postgres_admin")) as url:
        yield settings.model_copy(update={"database_url": url})


def test_two_generation_lineage(temporal_env, ray_cluster, store_settings, policy):
    env, _address, loop = temporal_env
    settings = store_settings
    # one name per store: workflow ids and trial artifacts are named after the lineage
    name = "two-gens" if settings.db_url.startswith("sqlite") else "two-gens-pg"
    spec = _spec(name, policy.base_url, generations=2, attempts=2, trial_batch_size=3)
    result, found = loop.run_until_complete(_run_in_process(env, settings, spec))
    records, gens, status = _stored(settings, name)
    assert status == "completed"
    assert len(records) == len(TASKS) * 2 * 2
    assert len({r.trial_id for r in records}) == len(records)
    assert [(g[0], g[1], g[2]) for g in gens] == [(0, "completed", ["expansion"]), (1, "completed", ["expansion"])]
    with se.session_scope(se.init_db(settings.db_url)) as s:  # the last generation's index, as the tables show it
        assert lineages.get_lineage(session=s, lineage_id=name).current_generation == 1
    assert gens[0][3]["expansion"]["trials"] == len(TASKS) * 2
    assert all(r.has_real_reward for r in records), [(r.failure_class, r.failure_detail) for r in records]
    # findable in the Web UI by search attribute: the lineage run(s) plus its generation and stage children
    assert any(w == f"lineage-{name}" for w in found)
    assert any(w.endswith("-gen-1-expansion") for w in found)
    # trials ran on both Ray nodes
    nodes = {r.worker.split("/")[1] for r in records}
    assert len(nodes) == 2, nodes
    if name == "two-gens":  # the saved histories the replay test reads
        loop.run_until_complete(save_histories(env, name))


def _lineage_containers() -> list:
    client = docker.from_env()
    return client.containers.list(all=True, filters={"label": "mindforge.managed=true"})


def _generation_trials(settings, lineage_id: str, generation: int, stage: str) -> list:
    with se.session_scope(se.init_db(settings.db_url)) as s:
        rows = trials.list_trials(session=s, lineage_id=lineage_id, generation_index=generation, stage=stage)
        return [r.to_record() for r in rows]


def test_worker_killed_mid_expansion_resumes_without_loss_or_double_count(temporal_env, ray_cluster, settings):
    """A SIGKILL of the worker in generation 1's Expansion (after a continue-as-new): the lineage resumes,
    no trial is lost or run twice, and the splits stay as assigned. SCRIPTED POLICY behind the HTTP API."""
    env, address, loop = temporal_env
    from mindforge.hcp import load_contract

    model_id = load_contract(CONTRACT).model.id
    # two more tasks pinned on the selection and sealed splits, the rest assigned by hash: the
    # stored assignment must be the pure function's, before and after the SIGKILL
    pinned = {"jsonl-to-csv": PoolSplit.SELECTION, "regex-ipv4-extract": PoolSplit.SEALED}
    splits = SplitConfig(selection_fraction=0.0, sealed_fraction=0.0, min_tasks=1, overrides=pinned)
    with start_scripted_policy(_finish_script(model_id, delay_sec=1.5)) as slow_policy:
        spec = _spec(
            "crash", slow_policy.base_url, generations=2, attempts=3, trial_batch_size=9, heartbeat_timeout_sec=8,
            splits=splits,
        )
        spec.tasks += [str(BUNDLED_TASKS / t) for t in pinned]
        cmd = [str(Path(sys.executable).parent / "mindforge"), "worker", "--graceful-shutdown-sec", "2"]
        wenv = worker_env(settings, address, ray_cluster.address)
        logs = settings.data_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        first = subprocess.Popen(cmd, env=wenv, stdout=(logs / "worker-1.log").open("wb"), stderr=subprocess.STDOUT)
        second = None
        try:

            async def start() -> None:
                from workflows.options import search_attributes

                await env.client.start_workflow(
                    "LineageWorkflow",
                    LineageInput(lineage_id=spec.name, spec=spec),
                    id=f"lineage-{spec.name}",
                    task_queue=ORCHESTRATION_QUEUE,
                    search_attributes=search_attributes(spec.name),
                )

            loop.run_until_complete(start())
            deadline = time.monotonic() + 400
            while time.monotonic() < deadline:  # kill inside generation 1, not generation 0
                done = len(_generation_trials(settings, "crash", 1, "expansion"))
                if done >= 2:
                    break
                time.sleep(0.5)
            assert 2 <= done < len(TASKS) * 3, f"{done} generation-1 trials stored before the kill"
            before = _splits(settings, "crash")
            first.send_signal(signal.SIGKILL)
            first.wait(10)
            second = subprocess.Popen(
                cmd, env=wenv, stdout=(logs / "worker-2.log").open("wb"), stderr=subprocess.STDOUT
            )
            handle = env.client.get_workflow_handle(f"lineage-{spec.name}")
            loop.run_until_complete(asyncio.wait_for(handle.result(), timeout=400))
        finally:
            for proc in (first, second):
                if proc and proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(60)
    records, gens, status = _stored(settings, "crash")
    assert status == "completed" and [g[1] for g in gens] == ["completed", "completed"]
    for g in (0, 1):  # none lost: every expansion trial of both generations, and the sealed ones
        assert len(_generation_trials(settings, "crash", g, "expansion")) == len(TASKS) * 3
        assert gens[g][3]["expansion"]["trials"] == len(TASKS) * 3
    # the kept pair's sealed trials run once, in generation 0; generation 1 reads them again
    assert len(_generation_trials(settings, "crash", 0, "sealed")) == spec.evaluation.attempts
    assert _generation_trials(settings, "crash", 1, "sealed") == []
    assert len(records) == 2 * len(TASKS) * 3 + spec.evaluation.attempts
    assert len({r.trial_id for r in records}) == len(records)  # none twice
    # one pinned sealed task, so one sealed reading (its name follows the restatement check)
    (first_row,), (second_row,) = gens[0][3]["readings"].values(), gens[1][3]["readings"].values()
    assert second_row["sealed_tasks"] == first_row["sealed_tasks"]
    leftover = [
        c.labels.get("mindforge.trial_id")
        for c in _lineage_containers()
        if c.labels.get("mindforge.run_id", "").startswith("crash/")
    ]
    assert leftover == []
    from mindforge.tasks.loader import load_tasks

    loaded = load_tasks([Path(t) for t in spec.tasks])
    want = assign_splits(
        [SplitCandidate(task_hash=t.content_hash, task_id=t.id, category=t.config.metadata.category) for t in loaded],
        splits, split_key="crash",
    )
    assert before == _splits(settings, "crash") == want  # stable across the kill and the restart
    assert {t.id: want[t.content_hash] for t in loaded if t.id in pinned} == pinned


def _splits(settings, lineage_id: str) -> dict:
    with se.session_scope(se.init_db(settings.db_url)) as s:
        return {m.task_hash: m.split for m in pool.list_pool(session=s, lineage_id=lineage_id)}


def test_replay_saved_histories():
    """Saved workflow histories replay against the current workflow code (determinism guard).

    The histories were recorded by the e2e tests named in
    :data:`tests.e2e.histories.HISTORIES` with ``MINDFORGE_SAVE_HISTORIES=1``: the
    lineage, generation, expansion (search off and on), discovery and update workflows.
    A change that breaks determinism fails here.
    """
    from temporalio.client import WorkflowHistory
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.worker import Replayer

    from workers.main import WORKFLOWS

    files = sorted(HISTORY_DIR.glob("*.json"))
    assert files == expected_files(), files
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)

    async def replay() -> None:
        for f in files:
            history = WorkflowHistory.from_json(f.stem, f.read_text())
            await replayer.replay_workflow(history)

    asyncio.run(replay())


def test_a_scheduled_run_continues_the_lineage_from_its_last_pair(temporal_env, ray_cluster, settings, policy):
    """A Temporal Schedule made by ``mindforge schedule extend`` adds generation 1 to a finished lineage.

    Generation 1 follows the last recorded index, starts from generation 0's successor
    pair, keeps the pool and its splits as stored, and runs the same frozen sealed tasks
    with the same attempts. The policy is the SCRIPTED POLICY (the one allowed double).
    """
    from mindforge.cli.schedule import create_extend_schedule
    from workers.lineage_activities import LineageActivities
    from workers.main import build_workers

    env, address, loop = temporal_env
    pinned = {"c-stats-make": PoolSplit.SEALED}
    splits = SplitConfig(selection_fraction=0.0, sealed_fraction=0.0, min_tasks=1, overrides=pinned)
    spec = _spec("nightly-cont", policy.base_url, generations=1, attempts=1, splits=splits)
    loop.run_until_complete(_run_in_process(env, settings, spec))
    before = _splits(settings, "nightly-cont")

    async def fire() -> None:
        acts = LineageActivities(settings.db_url)
        orch, sand = build_workers(env.client, acts, ["orchestration", "sandbox"], 5, settings=settings)
        async with orch, sand:
            # the test's own Temporal server (the cached settings may name the dev stack's)
            here = settings.model_copy(update={"temporal_address": address})
            sid = await create_extend_schedule("nightly-cont", 1, "0 2 * * *", here)
            handle = env.client.get_schedule_handle(sid)
            await handle.trigger()
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                gens = _stored(settings, "nightly-cont")[1]
                if (
                    len(gens) == 2 and gens[1][1] == "completed"
                    and _stored(settings, "nightly-cont")[2] == "completed"
                ):
                    break
                await asyncio.sleep(1)
            await handle.delete()

    loop.run_until_complete(fire())
    records, gens, status = _stored(settings, "nightly-cont")
    assert status == "completed" and [(g[0], g[1]) for g in gens] == [(0, "completed"), (1, "completed")]
    with se.session_scope(se.init_db(settings.db_url)) as s:
        rows = {g.index: g for g in lineages.list_generations(session=s, lineage_id="nightly-cont")}
        assert rows[1].contract_hash == rows[0].record["contract_hash"]  # the last successor pair
        lin = lineages.get_lineage(session=s, lineage_id="nightly-cont")
        assert lin.spec["generations"] == 2 and lin.spec["extensions"][0]["from_generation"] == 1
    assert _splits(settings, "nightly-cont") == before  # the pool was not re-assigned
    (first,), (second,) = gens[0][3]["readings"].values(), gens[1][3]["readings"].values()  # one sealed task
    assert first["sealed_tasks"] == second["sealed_tasks"] and len(first["sealed_tasks"]) == 1
    assert first["attempts"] == second["attempts"] == 2
    with se.session_scope(se.init_db(settings.db_url)) as s:
        cells = [
            sorted((r.task_hash, r.attempt) for r in trials.list_trials(
                session=s, lineage_id="nightly-cont", generation_index=g, stage="sealed"
            ))
            for g in (0, 1)
        ]
    # the same pair on the same frozen sealed tasks: read once, in generation 0, and reused by generation 1
    assert len(cells[0]) == first["attempts"] and cells[1] == []
    assert second["parent"]["n_trials"] == first["successor"]["n_trials"] == first["attempts"]
    expansion = [r for r in records if r.task_hash not in set(first["sealed_tasks"])]
    assert len(expansion) == 2 * (len(TASKS) - 1)  # one attempt per search task in each generation
