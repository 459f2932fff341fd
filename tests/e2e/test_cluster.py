"""A lineage on a Ray cluster that crosses a network (``mindforge cluster up``), its store on the cluster's Postgres.

The cluster has its own Docker bridge network: Postgres, Redis, a Ray head and two Ray
workers, each at its own address, all on the worker image (no host code mounted). This
process joins as a Ray Client over that network, as a ``mindforge worker`` started from
the cluster's settings file would. The trials run on both workers, told apart by address;
one worker is killed (``docker kill``) mid-batch and its trials move to the other: none
lost, none stored twice. Ray's own logs and a task's environment hold no password or key.
The policy is a SCRIPTED POLICY behind the OpenAI-compatible HTTP API (the one allowed
test double), listening on this machine's address on the cluster's network; every other
part is real.
"""

from __future__ import annotations

import asyncio
import json
import os
import time

import docker
import pytest

from mindforge.devstack.cluster import ClusterSpec
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
from mindforge.store.infra_attempts import list_infra_attempts
from tests.conftest import BUNDLED_TASKS, REPO
from tests.e2e.cluster_lineage import (
    cluster_settings,
    new_policy_key,
    node_addresses,
    started_cluster,
    stored,
)
from tests.e2e.test_lineage import NO_SPLITS, _finish_script

pytestmark = [pytest.mark.docker, pytest.mark.temporal, pytest.mark.ray, pytest.mark.slow]

TASKS = ["log-5xx-report", "fix-invoice-totals", "c-stats-make"]
CONTRACT = REPO / "hcp_contracts" / "baseline.toml"
ATTEMPTS = 4
SPEC = ClusterSpec(name="mfc-e2e", workers=2)


@pytest.fixture(scope="module")
def cluster(settings):
    """The cluster (Postgres, Redis, a head, two workers on their network) for this module; removed after it."""
    with started_cluster(settings, SPEC) as info:
        yield info


def _faults(db_url: str, name: str) -> int:
    """Infrastructure attempts stored for the lineage: trials a fault ended, run again by Temporal's retry."""
    eng = se.init_db(db_url)
    try:
        with se.session_scope(eng) as s:
            return len(list_infra_attempts(session=s, lineage_id=name))
    finally:
        eng.dispose()


def test_cluster_status_lists_the_running_nodes_at_their_addresses(cluster):
    """``mindforge cluster status --json``: every node running at its own address on the network; ready."""
    from typer.testing import CliRunner

    from mindforge.cli.main import app

    done = CliRunner().invoke(app, ["cluster", "status", "--name", SPEC.name, "--json"])
    assert done.exit_code == 0, done.output
    found = json.loads(done.stdout)
    assert found["ready"] is True
    roles = ["postgres", "redis", "head", "worker", "worker"]
    names = [f"{SPEC.name}-{r}" for r in roles[:3]] + [f"{SPEC.name}-worker-1", f"{SPEC.name}-worker-2"]
    assert [(n["container"], n["role"], n["state"]) for n in found["nodes"]] == list(
        zip(names, roles, ["running"] * 5, strict=True)
    )
    assert {n["container"]: n["address"] for n in found["nodes"]} == cluster.addresses
    assert len(set(cluster.addresses.values())) == 5 and cluster.host_address not in cluster.addresses.values()
    assert found["env_file"] == str(cluster.env_file)
    # the host worker's settings name the store's URL by file; no password in them
    password = cluster.database_url().split(":")[2].split("@")[0]
    assert password and password not in cluster.env_file.read_text()
    assert oct(cluster.database_url_file.stat().st_mode & 0o777) == "0o600"
    # a name nothing runs under: no nodes, not ready, exit 1
    missing = CliRunner().invoke(app, ["cluster", "status", "--name", "mfc-none", "--json"])
    assert missing.exit_code == 1 and json.loads(missing.stdout)["nodes"] == []


def _ray_logs_hold(client: docker.DockerClient, container: str, needle: str) -> bool:
    """Whether any file under the node's Ray temp dir (logs, session files) holds ``needle``."""
    found = client.containers.get(container).exec_run(["grep", "-rlF", "-D", "skip", "--", needle, "/tmp/ray"])
    assert found.exit_code in (0, 1), found.output  # 2: grep failed, which proves nothing
    return found.exit_code == 0


def test_ray_sees_no_secret_of_the_worker(settings, cluster, monkeypatch):
    """The worker's environment holds the store's URL and the policy key; Ray's job environment and logs do not.

    The positive control: an allowed variable (the artifact root) reaches the task and
    Ray's logs (the runtime-env agent writes a job's environment there), so the logs read
    are the ones that would hold a leaked variable.
    """
    import ray

    from workers.main import disconnect_ray, init_ray

    url, key = cluster.database_url(), new_policy_key()
    password = url.split(":")[2].split("@")[0]
    monkeypatch.setenv("MINDFORGE_DATABASE_URL", url)  # as a Kubernetes secretRef would put it
    monkeypatch.setenv("MINDFORGE_POLICY_API_KEY", key)
    monkeypatch.setenv("MINDFORGE_ARTIFACT_ROOT", str(settings.artifacts))
    disconnect_ray()  # the job's runtime environment is made when a driver connects: connect with this one
    init_ray(cluster.ray_address)

    @ray.remote(num_cpus=0.25, resources={"sandbox": 1})
    def environment() -> dict[str, str]:
        return dict(os.environ)

    env = ray.get(environment.remote())
    assert env.get("MINDFORGE_ARTIFACT_ROOT") == str(settings.artifacts)
    assert not {"MINDFORGE_DATABASE_URL", "MINDFORGE_DATABASE_URL_FILE", "MINDFORGE_POLICY_API_KEY"} & env.keys()
    assert not [k for k, v in env.items() if password in v or key in v]
    client = docker.from_env()
    nodes = [f"{SPEC.name}-head", f"{SPEC.name}-worker-1", f"{SPEC.name}-worker-2"]
    assert any(_ray_logs_hold(client, n, str(settings.artifacts)) for n in nodes)
    for node in nodes:
        assert not _ray_logs_hold(client, node, password), node
        assert not _ray_logs_hold(client, node, key), node
        assert password not in client.containers.get(node).logs().decode(errors="replace")
    disconnect_ray()


def _trial_sandboxes(client) -> list[tuple[str, str]]:
    """(container id, owner host) of each running trial sandbox; the engine's start-up probe is left out."""
    found = client.containers.list(filters={"label": f"{owner.MANAGED}=true"})
    return [
        (c.id, c.labels.get(owner.OWNER_HOST, "")) for c in found
        if c.labels.get(owner.RUN_ID) not in (None, "probe")
    ]


def test_lineage_on_the_cluster_runs_on_each_worker_and_survives_a_killed_one(temporal_env, settings, cluster):
    """Trials run on both workers (by address, never the head); a worker killed mid-trial: 0 lost, 0 twice."""
    from mindforge.hcp import load_contract
    from mindforge.reports import gather_report_data, render_report
    from workers.lineage_activities import LineageActivities
    from workers.main import build_workers, init_ray
    from workflows.options import search_attributes

    env, _address, loop = temporal_env
    key = new_policy_key()
    worker_settings = cluster_settings(settings, cluster, key)
    assert worker_settings.db_url.startswith("postgresql+psycopg://")
    init_ray(cluster.ray_address)
    nodes = [f"{SPEC.name}-worker-1", f"{SPEC.name}-worker-2"]
    model_id = load_contract(CONTRACT).model.id
    name = "on-cluster"
    killed: list[tuple[str, int]] = []  # (the container killed, trials stored at the kill)

    async def kill_when_busy(finished: asyncio.Future) -> None:
        """Kill the first worker that has stored a trial and has just started another.

        A sandbox still running and first seen under 1.5 s ago belongs to a trial in its
        2 s wait on the policy, so the kill lands mid-trial. Which worker it is does not
        matter: Ray may give nearly the whole batch to one, so waiting on a fixed worker
        could find it idle. Sandboxes are remembered by when they were first seen.
        """
        client = docker.from_env()
        first_seen: dict[str, tuple[str, float]] = {}  # sandbox id -> (its host, first seen)
        while not finished.done():
            rows, _ = await asyncio.to_thread(stored, worker_settings.db_url, name)
            running = await asyncio.to_thread(_trial_sandboxes, client)
            now = time.monotonic()
            for cid, host in running:
                first_seen.setdefault(cid, (host, now))
            fresh = {first_seen[cid][0] for cid, _ in running if now - first_seen[cid][1] < 1.5}
            done_on = {r.worker.split("/")[0] for r in rows}
            ready = [n for n in nodes if n in fresh and n in done_on]
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
        acts = LineageActivities(worker_settings.db_url)
        w_orch, w_sand = build_workers(env.client, acts, ["orchestration", "sandbox"], 5, settings=worker_settings)
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

    script = _finish_script(model_id, delay_sec=2.0)
    with start_scripted_policy(script, host=cluster.host_address, api_key=key) as policy:
        loop.run_until_complete(run(policy.base_url))
        answered = len(policy.app.state.policy.requests)
    records, status = stored(worker_settings.db_url, name)
    assert status == "completed"
    assert len(records) == len(TASKS) * ATTEMPTS  # none lost
    assert len({r.trial_id for r in records}) == len(records)  # none stored twice
    assert answered >= len(records)  # every trial asked the policy on the host, across the network
    faults = _faults(worker_settings.db_url, name)
    assert faults >= 1  # the killed worker's trial in flight was a fault, run again by the activity's retry
    victim, stored_at_kill = killed[0]
    hosts = [r.worker.split("/")[0] for r in records]
    addresses = node_addresses()
    by_address = [addresses[r.worker.split("/")[1]] for r in records]
    counts = {a: by_address.count(a) for a in sorted(set(by_address))}
    print(f"cluster lineage: {len(records)} trials by node address {counts}, {victim} killed with "
          f"{stored_at_kill} stored, {faults} fault-ended runs run again")
    # scheduled on each worker, told apart by its own address on the network; never on the head
    assert set(by_address) == {cluster.addresses[n] for n in nodes}
    assert cluster.addresses[f"{SPEC.name}-head"] not in by_address
    assert all(cluster.addresses[h] == a for h, a in zip(hosts, by_address, strict=True))
    assert hosts.count(victim) <= stored_at_kill  # nothing stored from the killed worker after its kill
    eng = se.init_db(worker_settings.db_url)
    with se.session_scope(eng) as s:
        report = render_report(gather_report_data(s, name), "md")
    eng.dispose()
    assert "Trials per node" in report and all(h in report for h in set(hosts))
