"""The Temporal dev server is SIGKILLed mid-run and restarted on its SQLite file: the run goes on.

Real parts: the ``temporal`` dev server binary (started and restarted by the dev stack's
own :class:`~mindforge.devstack.services.TemporalComponent` on one database file), a
real worker, and MindForge's client connection (:func:`workflows.client.connect`). A
workflow waits on a durable timer while the server is killed at a seeded random point
and restarted a few seconds later; the worker and the waiting client must both ride
out the gap (the client's RPC retries, Temporal's ``RetryConfig``), and the workflow
completes once, with its one activity run once.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
import uuid
from datetime import timedelta

import pytest
from temporalio import activity, workflow
from temporalio.worker import Worker

from mindforge.devstack.services import TemporalComponent, _pid_alive
from tests.conftest import temporal_settings
from tests.faults.lineage_faults import fault_seeds, record_result
from workflows.client import connect

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

RUNS: list[str] = []
#: seconds the server stays down (its restart adds its start-up time)
GAP_SEC = 12.0


@activity.defn
async def note_run(token: str) -> str:
    """Counts its executions, so a test can tell a replayed activity from a re-run one."""
    RUNS.append(token)
    return token


@workflow.defn(sandboxed=False)
class TimerWorkflow:
    """Runs one activity, sleeps on a durable timer, returns the activity's result."""

    @workflow.run
    async def run(self, seconds: float) -> str:
        token = await workflow.execute_activity(
            note_run, workflow.info().workflow_id, start_to_close_timeout=timedelta(seconds=30)
        )
        await workflow.sleep(seconds)
        return token



async def _timer_started(handle) -> None:
    """Wait until the workflow's history holds its timer (so its activity completed and was recorded).

    Raises:
        AssertionError: no timer within 60 s.
    """
    from temporalio.api.enums.v1 import EventType

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        history = await handle.fetch_history()
        if any(e.event_type == EventType.EVENT_TYPE_TIMER_STARTED for e in history.events):
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the workflow started no timer within 60 s")


@pytest.mark.parametrize("seed", fault_seeds())
def test_a_run_rides_out_a_killed_and_restarted_server(tmp_path, seed) -> None:
    settings = temporal_settings(tmp_path)
    comp = TemporalComponent(settings)
    said: list[str] = []
    pid_file = tmp_path / "temporal" / "server.pid"
    kill_after = random.Random(seed).uniform(1.0, 4.0)  # seconds into the timer
    RUNS.clear()

    recovered: list[float] = []

    async def scenario() -> str:
        client = await connect(settings.temporal_address, "default")
        queue = f"faults-{uuid.uuid4().hex[:8]}"
        async with Worker(client, task_queue=queue, workflows=[TimerWorkflow], activities=[note_run]):
            handle = await client.start_workflow(TimerWorkflow.run, 12.0, id=f"timer-{seed}", task_queue=queue)
            result = asyncio.create_task(handle.result())
            await _timer_started(handle)  # the activity's completion is on record: the kill cannot split it
            await asyncio.sleep(kill_after)
            pid = _pid_alive(pid_file)
            assert pid, "the dev server is not running"
            os.kill(pid, signal.SIGKILL)
            killed = time.monotonic()
            await asyncio.sleep(GAP_SEC)
            assert (await asyncio.to_thread(comp.up, said.append)).up, said
            recovered.append(time.monotonic() - killed)  # down GAP_SEC, then the server's start-up
            return await asyncio.wait_for(result, timeout=120)

    try:
        assert comp.up(said.append).up, said
        assert asyncio.run(scenario()) == f"timer-{seed}"
        assert RUNS == [f"timer-{seed}"]  # the activity ran once; the restart replayed it
        record_result("Temporal server killed", seed, None, recovered[0])
    finally:
        comp.down(said.append)


def test_a_server_gone_for_longer_than_the_window_ends_the_wait_with_a_way_back(tmp_path) -> None:
    """Past the retry window the wait ends in an InfraError that names the workflow and how to go on."""
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.service import RetryConfig

    from mindforge.cli.temporal_client import workflow_result
    from mindforge.errors import InfraError

    settings = temporal_settings(tmp_path)
    comp = TemporalComponent(settings)
    said: list[str] = []

    async def scenario() -> None:
        short = RetryConfig(max_elapsed_time_millis=2000, max_retries=50)  # the window, shortened for the test
        client = await Client.connect(
            settings.temporal_address, data_converter=pydantic_data_converter, retry_config=short
        )
        handle = await client.start_workflow(TimerWorkflow.run, 60.0, id="timer-gone", task_queue="nobody")
        pid = _pid_alive(tmp_path / "temporal" / "server.pid")
        assert pid
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(InfraError, match="timer-gone is still on the server.*mindforge worker"):
            await workflow_result(settings, handle)

    try:
        assert comp.up(said.append).up, said
        asyncio.run(scenario())
    finally:
        comp.down(said.append)
