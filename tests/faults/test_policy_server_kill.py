"""The policy server is SIGKILLed while trials are in flight: they are faults, run again, never scored 0.

Who restarts it: the process that started it. Here that is the waiting side of the
lineage, :func:`mindforge.cli.lineage.wait_lineage` with ``policy=`` (what ``mindforge
quickstart`` calls with its embedded server), which starts it again on the same port. The
restarted server knows its base model only: the pair's adapter is loaded again by the
``run_trials`` activity before the next trials (:mod:`workers.trial_activities`).

SCRIPTED POLICY behind the real HTTP API, in a child process; Temporal, Ray, Docker and
SQLite are real.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
from datetime import UTC, datetime

import pytest

from mindforge.hcp import derive, load_contract, save_contract
from mindforge.policy.handoff import served_adapters
from mindforge.policy.server.runner import PolicyServerProcess
from mindforge.store import AdapterRevisionCreate, registry
from mindforge.store import engine as se
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

ADAPTER = "faults-import-r0"


def _adapter_contract(tmp_path, settings) -> str:
    """The baseline harness on an imported (registered, lineage-less) adapter ``ADAPTER``."""
    adapter_dir = tmp_path / "adapter"
    adapter_dir.mkdir()
    (adapter_dir / "adapter_config.json").write_text("{}", encoding="utf-8")
    with se.session_scope(se.init_db(settings.db_url)) as s:
        if registry.get_adapter_by_name(session=s, name=ADAPTER) is None:
            registry.register_adapter(
                session=s,
                adapter_in=AdapterRevisionCreate(
                    name=ADAPTER, base_model=load_contract(CONTRACT).model.id, path=str(adapter_dir),
                    sha256="0" * 64, rank=4, alpha=8.0,
                ),
            )
    child = derive(load_contract(CONTRACT), revision="1.0.0-faults", edit=f"model.adapter -> {ADAPTER}",
                   changes={"model.adapter": ADAPTER})
    return str(save_contract(child, tmp_path / "adapter-pair.toml"))


async def _kill_when_busy(server: PolicyServerProcess, rng: random.Random, killed: list[datetime]) -> None:
    """SIGKILL the server a seeded moment after its third chat request (trials in flight then)."""
    await wait_for_requests(server.base_url, 3)
    await asyncio.sleep(rng.uniform(0.0, 1.0))
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGKILL)
    killed.append(datetime.now(UTC))


@pytest.mark.parametrize("seed", fault_seeds())
def test_a_killed_policy_server_loses_no_trial_and_scores_no_fault(
    temporal_env, ray_cluster, settings, tmp_path, seed
) -> None:
    from mindforge.cli.lineage import wait_lineage
    env, address, loop = temporal_env
    name = f"policy-kill-{seed}"
    script = tmp_path / "script.json"
    script.write_text(json.dumps(slow_finish_script(load_contract(CONTRACT).model.id, delay_sec=1.5)))
    server = PolicyServerProcess("mindforge.policy.doubles.scripted", ["--script", str(script)],
                                 log_path=tmp_path / "policy.log").start()
    spec = fault_spec(name, server.base_url, contract=_adapter_contract(tmp_path, settings))
    killed: list[datetime] = []

    waiting = settings.model_copy(update={"temporal_address": address})

    async def wait_owning(handle) -> None:
        """Wait as quickstart does, restarting the policy server it owns when it dies."""
        await wait_lineage(waiting, handle.id, show=False, policy=server)

    try:
        fault = _kill_when_busy(server, random.Random(seed), killed)
        loop.run_until_complete(run_with_fault(env, settings, spec, fault, wait=wait_owning, timeout_sec=300))
        counts = fault_counts(settings, name, planned=len(TASKS) * 2)
        assert killed, "the server was never killed"
        record_result("policy server killed mid-trial", seed, counts, recovery_sec(settings, name, killed[0]))
        assert_nothing_lost(counts)
        assert counts.faults_recorded >= 1, "no trial was in flight when the server died"
        # the restarted server got the pair's adapter back before its trials ran
        assert ADAPTER in served_adapters(server.base_url)
    finally:
        server.stop()
