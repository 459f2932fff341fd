"""A Ray worker process is SIGKILLed while it runs a trial: the trial is a fault, run again, its sandbox reaped.

The trials' Ray tasks have ``max_retries=0`` (retries belong to Temporal): ``ray.get``
raises for the lost task, ``run_trials`` records an infrastructure attempt and fails its
attempt (retryable), and Temporal runs the lost trial again; finished trials are not run
again. The dead worker's sandbox container has no owner process any more and is removed
by the engine's orphan clean-up. SCRIPTED POLICY behind the real HTTP API; Temporal, a
two-node Ray cluster, Docker and SQLite are real. Meanwhile ``lineage status`` and
``report`` run in other processes against the store being written.
"""

from __future__ import annotations

import asyncio
import random
import time
from datetime import UTC, datetime

import docker
import psutil
import pytest

from mindforge.hcp import load_contract
from mindforge.policy.doubles.scripted import start_scripted_policy
from mindforge.sandbox.owner import MANAGED, RUN_ID
from tests.faults.lineage_faults import (
    CONTRACT,
    TASKS,
    Reads,
    assert_nothing_lost,
    fault_counts,
    fault_seeds,
    fault_spec,
    read_while_written,
    record_result,
    recovery_sec,
    run_with_fault,
    slow_finish_script,
    wait_for_requests,
)

pytestmark = [pytest.mark.docker, pytest.mark.temporal, pytest.mark.ray, pytest.mark.slow]

#: the process title Ray gives a worker while it runs ``run_trial_task``
TRIAL_TASK_TITLE = "ray::run_trial_task"


def trial_workers() -> list[psutil.Process]:
    """Ray worker processes running a trial right now (by process title)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if cmdline.startswith(TRIAL_TASK_TITLE):
            found.append(proc)
    return found


async def kill_a_trial_worker(base_url: str, rng: random.Random, killed: list[datetime]) -> None:
    """SIGKILL one Ray worker running a trial, a seeded moment after the policy's second request."""
    await wait_for_requests(base_url, 2)
    await asyncio.sleep(rng.uniform(0.0, 0.5))
    while not (busy := await asyncio.to_thread(trial_workers)):
        await asyncio.sleep(0.1)
    victim = rng.choice(busy)
    victim.kill()
    killed.append(datetime.now(UTC))


def _containers(run_prefix: str) -> list:
    client = docker.from_env()
    found = client.containers.list(all=True, filters={"label": f"{MANAGED}=true"})
    return [c for c in found if (c.labels.get(RUN_ID) or "").startswith(run_prefix)]


@pytest.mark.parametrize("seed", fault_seeds())
def test_a_killed_ray_worker_loses_no_trial_and_leaves_no_sandbox(temporal_env, ray_cluster, settings, seed) -> None:
    env, _address, loop = temporal_env
    name = f"ray-kill-{seed}"
    killed: list[datetime] = []
    reads = Reads(done=[])
    script = slow_finish_script(load_contract(CONTRACT).model.id, delay_sec=2.0)
    with start_scripted_policy(script) as policy:
        spec = fault_spec(name, policy.base_url)

        async def wait_reading(handle) -> None:
            """Wait for the lineage while status and report read its store from other processes."""
            await wait_for_requests(policy.base_url, 1)  # the lineage's row exists by then
            stop = asyncio.Event()
            reader = asyncio.create_task(read_while_written(name, stop, reads))
            await handle.result()
            stop.set()
            await reader

        began = time.monotonic()
        fault = kill_a_trial_worker(policy.base_url, random.Random(seed), killed)
        loop.run_until_complete(run_with_fault(env, settings, spec, fault, wait=wait_reading, timeout_sec=300))
    counts = fault_counts(settings, name, planned=len(TASKS) * 2)
    assert killed, "no Ray worker was killed"
    record_result("Ray worker killed mid-batch", seed, counts, recovery_sec(settings, name, killed[0]))
    assert_nothing_lost(counts)
    assert counts.faults_recorded >= 1, counts
    # status and report, read from other processes while the lineage wrote: whole, no lock errors
    assert len(reads.done) >= 2 and reads.failed == [], reads.failed
    assert time.monotonic() - began < 300
