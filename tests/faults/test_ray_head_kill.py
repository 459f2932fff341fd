"""The Ray head of a cluster that crosses a network is killed mid-lineage and started again: nothing lost.

``mindforge cluster up`` keeps the head's GCS state in the cluster's Redis (Ray's GCS
fault tolerance). The head container is SIGKILLed (``docker kill``) while trials run on
the workers, then started again, as a supervisor (Kubernetes, systemd) would start it: the
workers' raylets wait for it and rejoin, this process's Ray Client session (its server
was on the head) is lost and the sandbox queue's next activity connects anew
(``workers.main.ensure_ray``); the batch's activity fails, Temporal's retry runs the
trials that have no record, and finished ones are not run again. The lineage completes
with every planned trial stored once, none scored from the fault, no sandbox left.
SCRIPTED POLICY behind the real HTTP API; Temporal, Ray, Docker, Redis and Postgres are real.
"""

from __future__ import annotations

import asyncio
import random
import time
from datetime import UTC, datetime

import docker
import pytest

from mindforge.devstack.cluster import ClusterSpec
from mindforge.hcp import load_contract
from mindforge.policy.doubles.scripted import start_scripted_policy
from mindforge.store import engine as se
from mindforge.store import trials
from tests.e2e.cluster_lineage import cluster_settings, new_policy_key, node_addresses, started_cluster, stored
from tests.faults.lineage_faults import (
    CONTRACT,
    TASKS,
    assert_nothing_lost,
    fault_counts,
    fault_seeds,
    fault_spec,
    record_result,
    run_with_fault,
    slow_finish_script,
)

pytestmark = [pytest.mark.docker, pytest.mark.temporal, pytest.mark.ray, pytest.mark.slow]

SPEC = ClusterSpec(name="mfc-faults", workers=2)
ATTEMPTS = 4


@pytest.fixture(scope="module")
def cluster(settings):
    """The cluster for this module (Postgres, Redis, a head with GCS fault tolerance, two workers)."""
    with started_cluster(settings, SPEC) as info:
        yield info


async def kill_and_restart_head(db_url: str, name: str, rng: random.Random, killed: list[datetime]) -> None:
    """Once two trials are stored, wait a seeded moment, SIGKILL the head container, then start it again."""
    client = docker.from_env()
    while len((await asyncio.to_thread(stored, db_url, name))[0]) < 2:
        await asyncio.sleep(0.2)
    await asyncio.sleep(rng.uniform(0.0, 1.0))
    head = client.containers.get(f"{SPEC.name}-head")
    await asyncio.to_thread(head.kill)
    killed.append(datetime.now(UTC))
    await asyncio.to_thread(head.start)


def _first_stored_after(db_url: str, name: str, at: datetime) -> float | None:
    """Seconds from ``at`` to the first trial stored after it (the cluster taking trials again)."""
    with se.session_scope(se.init_db(db_url)) as s:
        after = [r.created_at for r in trials.list_trials(session=s, lineage_id=name) if r.created_at > at]
    return (min(after) - at).total_seconds() if after else None


@pytest.mark.parametrize("seed", fault_seeds())
def test_a_killed_ray_head_loses_no_trial(temporal_env, settings, cluster, seed) -> None:
    import ray

    from workers.main import init_ray

    env, _address, loop = temporal_env
    name = f"head-kill-{seed}"
    key = new_policy_key()
    worker_settings = cluster_settings(settings, cluster, key)
    init_ray(cluster.ray_address)
    workers_before = {n: a for n, a in node_addresses().items() if a != cluster.addresses[f"{SPEC.name}-head"]}
    killed: list[datetime] = []
    script = slow_finish_script(load_contract(CONTRACT).model.id, delay_sec=2.0)
    began = time.monotonic()
    with start_scripted_policy(script, host=cluster.host_address, api_key=key) as policy:
        spec = fault_spec(name, policy.base_url, attempts=ATTEMPTS)
        fault = kill_and_restart_head(worker_settings.db_url, name, random.Random(seed), killed)
        loop.run_until_complete(
            run_with_fault(env, worker_settings, spec, fault, worker_settings=worker_settings, timeout_sec=500)
        )
    counts = fault_counts(worker_settings, name, planned=len(TASKS) * ATTEMPTS)
    assert killed, "the head was not killed"
    recovery = _first_stored_after(worker_settings.db_url, name, killed[0])
    record_result("Ray head killed mid-lineage", seed, counts, recovery)
    print(f"head killed: {counts}; first trial stored {recovery} s after the kill")
    assert_nothing_lost(counts)
    rows, _ = stored(worker_settings.db_url, name)
    assert recovery is not None, "no trial was stored after the head came back"
    # the workers rode the outage out: every trial, before the kill and after it, ran on the nodes of before
    assert {r.worker.split("/")[1] for r in rows} <= set(workers_before)
    client = docker.from_env()
    for index in (1, 2):
        worker = client.containers.get(f"{SPEC.name}-worker-{index}")
        assert worker.status == "running" and worker.attrs["RestartCount"] == 0
    assert ray.is_initialized()  # connected again, to the restarted head
    assert time.monotonic() - began < 500
