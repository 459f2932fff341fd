"""A lineage on a Ray cluster of containers (``mindforge cluster up``), its store on the cluster's Postgres.

Two Ray worker containers run the trials; one is killed (``docker kill``) mid-batch and
its trials move to the other: none lost, none stored twice, and the report shows the
trials per node. The policy is a SCRIPTED POLICY behind the OpenAI-compatible HTTP API
(the one allowed test double); every other part is real.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import docker
import pytest

from mindforge.devstack.cluster import ClusterSpec, cluster_down, cluster_up
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
from mindforge.sandbox import owner
from mindforge.store import engine as se
from mindforge.store import lineages, trials
from mindforge.store.infra_attempts import list_infra_attempts
from tests.conftest import BUNDLED_TASKS, REPO
from tests.e2e.test_lineage import NO_SPLITS, _finish_script

pytestmark = [pytest.mark.docker, pytest.mark.temporal, pytest.mark.ray, pytest.mark.slow]

# the cluster's head takes Ray's token when this machine has one; Ray reads the mode when first imported
if (Path.home() / ".ray" / "auth_token").is_file():
    os.environ.setdefault("RAY_AUTH_MODE", "token")

TASKS = ["log-5xx-report", "fix-invoice-totals", "c-stats-make"]
CONTRACT = REPO / "hcp_contracts" / "baseline.toml"
ATTEMPTS = 4
#: ports apart from the dev stack's and from a `mindforge cluster up` with the defaults
SPEC = ClusterSpec(name="mfc-e2e", workers=2, gcs_port=6490, client_port=10490, postgres_port=5490)


@pytest.fixture(scope="module")
def cluster(settings):
    """The cluster (Postgres, a head, two workers) for this module; removed after it."""
    import ray

    info = cluster_up(settings, SPEC, say=lambda m: None)
    yield info
    # a Ray driver whose head goes away ends its own process: this test session must not be one
    ray.shutdown()
    removed = cluster_down(settings, SPEC.name, say=lambda m: None)
    assert {f"container {c}" for c in info.containers} <= set(removed)
    assert f"volume {SPEC.name}-pgdata" in removed


def _stored(db_url: str, name: str):
    eng = se.init_db(db_url)
    try:
        with se.session_scope(eng) as s:
            rows = [r.to_record() for r in trials.list_trials(session=s, lineage_id=name)]
            lin = lineages.get_lineage(session=s, lineage_id=name)
            return rows, str(lin.status) if lin else None
    finally:
        eng.dispose()


def _faults(db_url: str, name: str) -> int:
    """Infrastructure attempts stored for the lineage: trials a fault ended, run again by Temporal's retry."""
    eng = se.init_db(db_url)
    try:
        with se.session_scope(eng) as s:
            return len(list_infra_attempts(session=s, lineage_id=name))
    finally:
        eng.dispose()


def test_cluster_status_lists_the_running_nodes(cluster):
    """``mindforge cluster status --json``: Postgres, the head and both workers running; ready."""
    from typer.testing import CliRunner

    from mindforge.cli.main import app

    done = CliRunner().invoke(app, ["cluster", "status", "--name", SPEC.name, "--json"])
    assert done.exit_code == 0, done.output
    found = json.loads(done.stdout)
    assert found["ready"] is True
    assert [(n["container"], n["role"], n["state"]) for n in found["nodes"]] == [
        (f"{SPEC.name}-postgres", "postgres", "running"),
        (f"{SPEC.name}-head", "head", "running"),
        (f"{SPEC.name}-worker-1", "worker", "running"),
        (f"{SPEC.name}-worker-2", "worker", "running"),
    ]
    assert found["env_file"] == str(cluster.env_file)
    # a name nothing runs under: no nodes, not ready, exit 1
    missing = CliRunner().invoke(app, ["cluster", "status", "--name", "mfc-none", "--json"])
    assert missing.exit_code == 1 and json.loads(missing.stdout)["nodes"] == []


def _trial_sandboxes(client) -> list[tuple[str, str]]:
    """(container id, owner host) of each running trial sandbox; the engine's start-up probe is left out."""
    found = client.containers.list(filters={"label": f"{owner.MANAGED}=true"})
    return [(c.id, c.labels.get(owner.OWNER_HOST, "")) for c in found if c.labels.get(owner.RUN_ID) != "probe"]


def test_lineage_on_the_cluster_survives_a_killed_worker(temporal_env, settings, cluster):
    """Kill a worker container while it runs a trial: the batch finishes on the other, 0 lost, 0 twice."""
    from mindforge.hcp import load_contract
    from mindforge.reports import gather_report_data, render_report
    from workers.lineage_activities import LineageActivities
    from workers.main import build_workers, init_ray
    from workflows.options import search_attributes

    env, _address, loop = temporal_env
    cluster_settings = settings.model_copy(update={"database_url": cluster.env["MINDFORGE_DATABASE_URL"]})
    assert cluster_settings.db_url.startswith("postgresql+psycopg://")
    init_ray(cluster.env["MINDFORGE_RAY_ADDRESS"])
    nodes = [f"{SPEC.name}-worker-1", f"{SPEC.name}-worker-2"]
    model_id = load_contract(CONTRACT).model.id
    name = "on-cluster"
    killed: list[tuple[str, int]] = []  # (the container killed, trials stored at the kill)

    async def kill_when_busy(finished: asyncio.Future) -> None:
        """Kill the first worker that has stored a trial and has just started another.

        A sandbox still running and first seen under 1.5 s ago belongs to a trial in its
        2 s wait on the policy, so the kill lands mid-trial. Which worker it is does not
        matter: Ray may give nearly the whole batch to one (11 of 12 trials in the runs
        measured), so waiting on a fixed worker could find it idle, or never busy again.
        Sandboxes are remembered by when they were first seen, so one that appears before
        its worker's stored trial is visible still counts on the next look.
        """
        client = docker.from_env()
        first_seen: dict[str, tuple[str, float]] = {}  # sandbox id -> (its host, first seen)
        while not finished.done():
            rows, _ = await asyncio.to_thread(_stored, cluster_settings.db_url, name)
            running = await asyncio.to_thread(_trial_sandboxes, client)
            now = time.monotonic()
            for cid, host in running:
                first_seen.setdefault(cid, (host, now))
            fresh = {first_seen[cid][0] for cid, _ in running if now - first_seen[cid][1] < 1.5}
            stored = {r.worker.split("/")[0] for r in rows}
            ready = [n for n in nodes if n in fresh and n in stored]
            if ready:
                await asyncio.to_thread(lambda node=ready[0]: client.containers.get(node).kill())
                killed.append((ready[0], len(rows)))
                return
            await asyncio.sleep(0.2)
        raise AssertionError("the lineage ended before any worker started a trial after storing one")

    async def run(policy_url: str):
        spec = LineageSpec(
            name=name,
            tasks=[str(BUNDLED_TASKS / t) for t in TASKS],
            contract_path=str(CONTRACT),
            generations=1,
            stages=[Stage.EXPANSION],
            runtime=RuntimeSpec(policy_url=policy_url, trial_batch_size=len(TASKS) * ATTEMPTS),
            expansion=ExpansionSpec(attempts=ATTEMPTS, search=SearchBudgetSpec(enabled=False)),
            evaluation=EvaluationSpec(splits=NO_SPLITS),
        )
        acts = LineageActivities(cluster_settings.db_url)
        w_orch, w_sand = build_workers(env.client, acts, ["orchestration", "sandbox"], 5, settings=cluster_settings)
        async with w_orch, w_sand:
            handle = await env.client.start_workflow(
                "LineageWorkflow", LineageInput(lineage_id=name, spec=spec), id=f"lineage-{name}",
                task_queue=ORCHESTRATION_QUEUE, search_attributes=search_attributes(name),
            )
            finished = asyncio.ensure_future(asyncio.wait_for(handle.result(), timeout=600))
            try:
                await kill_when_busy(finished)
                await finished
            finally:
                finished.cancel()

    with start_scripted_policy(_finish_script(model_id, delay_sec=2.0)) as policy:
        loop.run_until_complete(run(policy.base_url))
    records, status = _stored(cluster_settings.db_url, name)
    assert status == "completed"
    assert len(records) == len(TASKS) * ATTEMPTS  # none lost
    assert len({r.trial_id for r in records}) == len(records)  # none stored twice
    faults = _faults(cluster_settings.db_url, name)
    assert faults >= 1  # the killed worker's trial in flight was a fault, run again by the activity's retry
    victim, stored_at_kill = killed[0]
    hosts = [r.worker.split("/")[0] for r in records]
    counts = {h: hosts.count(h) for h in sorted(set(hosts))}
    print(f"cluster lineage: {len(records)} trials {counts}, {victim} killed with {stored_at_kill} stored, "
          f"{faults} fault-ended runs run again")
    assert set(hosts) == set(nodes)  # spread over both containers (the survivor ran the rest), never the head
    assert hosts.count(victim) <= stored_at_kill  # nothing stored from the killed worker after its kill
    eng = se.init_db(cluster_settings.db_url)
    with se.session_scope(eng) as s:
        report = render_report(gather_report_data(s, name), "md")
    eng.dispose()
    assert "Trials per node" in report and all(h in report for h in set(hosts))
