"""The Docker engine restarts while trials run: the lost sandboxes are faults, run again, and none is left.

``dockerd`` gets SIGTERM (it stops every container, as ``systemctl restart docker``
does) at a seeded moment while trials are in their agent phase, and is started again a
few seconds later by the dev stack's own :class:`~mindforge.devstack.sandbox.DockerComponent`
with the command line it had. The trials in flight end in ``infra_error`` (their exec
stream broke), trials started meanwhile in ``env_start_failed`` or ``infra_error``;
``run_trials`` records them as infrastructure attempts and Temporal runs them again once
the engine answers. The stopped sandboxes are removed by their trial label before the
reruns. SCRIPTED POLICY behind the real HTTP API; the engine, Temporal, Ray and SQLite are
real. It restarts the engine every other Docker user on this host shares.
"""

from __future__ import annotations

import asyncio
import random
import signal
from datetime import UTC, datetime

import psutil
import pytest

from mindforge.devstack.sandbox import DockerComponent
from mindforge.hcp import load_contract
from mindforge.policy.doubles.scripted import start_scripted_policy
from tests.faults.lineage_faults import (
    CONTRACT,
    TASKS,
    assert_nothing_lost,
    fault_counts,
    fault_seeds,
    fault_spec,
    record_result,
    recovery_sec,
    run_with_fault,
    slow_finish_script,
    wait_for_requests,
)

pytestmark = [pytest.mark.docker, pytest.mark.temporal, pytest.mark.ray, pytest.mark.slow]

#: seconds the engine stays down
GAP_SEC = 3.0


def _dockerd() -> psutil.Process:
    found = [p for p in psutil.process_iter(["name"]) if p.info["name"] == "dockerd"]
    assert len(found) == 1, f"expected one dockerd, found {len(found)}"
    return found[0]


async def restart_engine(base_url: str, settings, rng: random.Random, restarts: list[datetime]) -> None:
    """SIGTERM dockerd a seeded moment after the policy's second request; start it again GAP_SEC later."""
    await wait_for_requests(base_url, 2)
    await asyncio.sleep(rng.uniform(0.0, 1.0))
    proc = _dockerd()
    argv = proc.cmdline()
    restarts.append(datetime.now(UTC))
    proc.send_signal(signal.SIGTERM)
    await asyncio.to_thread(proc.wait, 60)
    await asyncio.sleep(GAP_SEC)
    said: list[str] = []
    status = await asyncio.to_thread(DockerComponent(settings, dockerd_argv=argv).up, said.append)
    assert status.up, said


@pytest.mark.parametrize("seed", fault_seeds())
def test_an_engine_restart_loses_no_trial_and_leaves_no_sandbox(temporal_env, ray_cluster, settings, seed) -> None:
    env, _address, loop = temporal_env
    name = f"dockerd-restart-{seed}"
    restarts: list[datetime] = []
    script = slow_finish_script(load_contract(CONTRACT).model.id, delay_sec=2.0)
    with start_scripted_policy(script) as policy:
        spec = fault_spec(name, policy.base_url)

        fault = restart_engine(policy.base_url, settings, random.Random(seed), restarts)
        loop.run_until_complete(run_with_fault(env, settings, spec, fault))
    counts = fault_counts(settings, name, planned=len(TASKS) * 2)
    assert restarts, "the engine was never restarted"
    record_result("dockerd restarted mid-trial", seed, counts, recovery_sec(settings, name, restarts[0]))
    assert_nothing_lost(counts)
    assert counts.faults_recorded >= 1, counts
