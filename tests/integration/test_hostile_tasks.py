"""Hostile tasks that load (tests/fixtures/hostile/) run on the real Docker engine.

A stale reward baked into the image is not trusted (the verifier wrote none: a verifier
error, not a pass), and a reference solution that forks without end is held by the
sandbox's pids limit and ends with a clear failure class. After each trial the host is
as before: no container of the run is left, the host's process count is back within a
margin, the fixture folder is unchanged, and the trial wrote only into its artifact
directory.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from mindforge.agent.simple import NopAgent, OracleAgent
from mindforge.domain import FailureClass, LimitFired
from mindforge.sandbox.owner import RUN_ID
from mindforge.tasks.hashing import content_hash
from mindforge.tasks.loader import load_task
from mindforge.trials.run import run_trial, trial_dir
from tests.conftest import REPO

pytestmark = pytest.mark.docker

HOSTILE = REPO / "tests" / "fixtures" / "hostile"
#: host processes that may come and go meanwhile (other tests, the dev stack); the fork
#: bomb alone would leave hundreds (the pids limit is 512)
PROCESS_MARGIN = 60


def _host_processes() -> int:
    return sum(1 for name in os.listdir("/proc") if name.isdigit())


def _files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")} if root.exists() else set()


def _run(name: str, agent, docker_engine, image_map, settings):
    """One trial of fixture ``name``; checks the host is untouched and returns the record."""
    task = load_task(HOSTILE / name)
    before_hash, before_procs = content_hash(task.path), _host_processes()
    run_id = f"hostile-{name}-{uuid.uuid4().hex[:6]}"
    artifacts_before = _files_under(settings.artifacts)
    rec = run_trial(task, agent, docker_engine, run_id=run_id, trial_id=f"{agent.name}.0",
                    artifact_root=settings.artifacts, image_map=image_map)
    left = docker_engine.client.containers.list(all=True, filters={"label": f"{RUN_ID}={run_id}"})
    assert not left, f"containers left behind: {[c.name for c in left]}"
    assert content_hash(task.path) == before_hash, "the trial changed the task folder"
    out = trial_dir(settings.artifacts, run_id, f"{agent.name}.0")
    new = _files_under(settings.artifacts) - artifacts_before
    assert new and all(p == out or out in p.parents or p in out.parents for p in new), sorted(new)[:5]
    assert _host_processes() <= before_procs + PROCESS_MARGIN, "processes left on the host"
    return rec


def test_a_stale_reward_in_the_image_is_not_trusted(docker_engine, image_map, settings):
    rec = _run("stale_reward", OracleAgent(), docker_engine, image_map, settings)
    assert rec.reward is None and rec.failure_class == FailureClass.VERIFIER_ERROR, rec
    assert "wrote neither" in rec.failure_detail
    nop = _run("stale_reward", NopAgent(), docker_engine, image_map, settings)
    assert nop.reward is None and nop.failure_class == FailureClass.VERIFIER_ERROR


@pytest.mark.slow
def test_a_fork_bomb_is_held_by_the_pids_limit(docker_engine, image_map, settings):
    rec = _run("fork_bomb", OracleAgent(), docker_engine, image_map, settings)
    # solve.sh either runs into the agent timeout or ends when its forks are refused
    assert not rec.passed and rec.failure_class in (FailureClass.AGENT_TIMEOUT, FailureClass.TASK_FAILED), rec
    assert rec.limit_fired == LimitFired.PIDS_LIMIT and "forks refused" in rec.failure_detail, rec
    assert rec.timings.agent_sec < 15 + 60, "the agent phase overran its 15 s timeout by more than a minute"
