"""Schedules created from the CLI, and ``mindforge dev status`` for Temporal and Ray, on the real services."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BUNDLED_TASKS, REPO

# a Temporal server, a Ray cluster, CLI processes
pytestmark = [pytest.mark.temporal, pytest.mark.ray, pytest.mark.slow]


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).parent / "mindforge"), *args], env=env, capture_output=True, text=True, timeout=120
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_schedule_from_cli_has_cron_and_overlap_skip(temporal_env, settings):
    from temporalio.client import ScheduleOverlapPolicy

    env, address, loop = temporal_env
    cli_env = {**os.environ, "MINDFORGE_TEMPORAL_ADDRESS": address, "MINDFORGE_DATA_DIR": str(settings.data_dir)}
    out = _cli(
        "schedule", "create", "--cron", "0 2 * * *", "--name", "nightly",
        "--tasks", str(BUNDLED_TASKS / "log-5xx-report"), "--contract", str(REPO / "hcp_contracts" / "baseline.toml"),
        "--search-attempts", "0", "--audit-judge", "--selection", "0", "--sealed", "0", "--min-split-tasks", "1",
        # no selection split, so no gate may run (one that could never pass is refused): no Update
        "--stages", "discovery,expansion",
        env=cli_env,
    )
    assert out.returncode == 0, out.stderr
    assert "schedules/schedule-nightly" in out.stdout

    async def describe():
        return await env.client.get_schedule_handle("schedule-nightly").describe()

    desc = loop.run_until_complete(describe())
    # the server stores a cron expression as its calendar equivalent
    [cal] = desc.schedule.spec.calendars
    assert [(r.start, r.end) for r in cal.hour] == [(2, 2)] and [(r.start, r.end) for r in cal.minute] == [(0, 0)]
    assert [r.start for r in cal.day_of_month] == [1] and cal.day_of_month[0].end == 31
    assert desc.schedule.policy.overlap == ScheduleOverlapPolicy.SKIP
    assert desc.schedule.action.workflow == "LineageWorkflow"
    [arg] = desc.schedule.action.args  # the LineageInput each firing starts with
    spec = json.loads(arg.data)["spec"]
    assert spec["expansion"]["audit_judge"] is True and spec["expansion"]["search"]["enabled"] is False
    splits = spec["evaluation"]["splits"]
    assert splits["selection_fraction"] == 0.0 and splits["min_tasks"] == 1
    listed = _cli("schedule", "list", env=cli_env)
    assert "schedule-nightly" in listed.stdout
    as_json = _cli("schedule", "list", "--json", env=cli_env)
    assert as_json.returncode == 0, as_json.stderr
    [row] = [r for r in json.loads(as_json.stdout) if r["id"] == "schedule-nightly"]
    assert set(row) == {"id", "cron", "overlap", "paused", "workflow", "workflow_id", "next_run"}
    assert row["cron"].startswith("0 2 ") and row["overlap"] == "SKIP" and row["paused"] is False
    assert row["workflow"] == "LineageWorkflow" and row["workflow_id"] == "lineage-nightly"
    assert row["next_run"].endswith("02:00:00+00:00")
    assert _cli("schedule", "delete", "schedule-nightly", env=cli_env).returncode == 0


def test_commands_that_talk_to_temporal_exit_zero(temporal_env, settings):
    """The Temporal client's threads used to abort interpreter teardown (status 134) in about
    one run in four after the output was printed (https://github.com/temporalio/sdk-python/issues/300)."""
    _env, address, _loop = temporal_env
    cli_env = {**os.environ, "MINDFORGE_TEMPORAL_ADDRESS": address, "MINDFORGE_DATA_DIR": str(settings.data_dir)}
    for _ in range(8):
        out = _cli("schedule", "list", "--json", env=cli_env)
        assert out.returncode == 0, out.stderr
        assert isinstance(json.loads(out.stdout), list)


def test_signalling_an_unknown_lineage_is_one_clear_line(temporal_env, settings):
    """``lineage pause|resume|cancel`` on a lineage with no workflow says so in one line (exit 2), no traceback."""
    _env, address, _loop = temporal_env
    cli_env = {**os.environ, "MINDFORGE_TEMPORAL_ADDRESS": address, "MINDFORGE_DATA_DIR": str(settings.data_dir)}
    for verb in ("pause", "resume", "cancel"):
        out = _cli("lineage", verb, "no-such-lineage", env=cli_env)
        assert out.returncode == 2, (out.stdout, out.stderr)
        assert "Traceback" not in out.stderr and "lineage no-such-lineage" in out.stderr
        assert f"no running workflow lineage-no-such-lineage to {verb}" in " ".join(out.stderr.split())


def _status(env: dict[str, str]) -> dict[str, dict]:
    out = _cli("dev", "status", "--json", "-c", "temporal", "-c", "ray", env=env)
    assert out.returncode in (0, 1), out.stderr
    return {row["name"]: row for row in json.loads(out.stdout)}


def test_dev_status_reports_temporal_and_ray_up_and_down(temporal_env, ray_cluster, settings, tmp_path):
    _env, address, _loop = temporal_env
    base = {**os.environ, "MINDFORGE_DATA_DIR": str(tmp_path)}
    up = _status({**base, "MINDFORGE_TEMPORAL_ADDRESS": address, "MINDFORGE_RAY_ADDRESS": ray_cluster.address})
    assert up["temporal"]["up"] and up["temporal"]["address"] == address
    assert up["ray"]["up"] and up["ray"]["address"] == ray_cluster.address
    dead = f"127.0.0.1:{_free_port()}"
    down = _status({**base, "MINDFORGE_TEMPORAL_ADDRESS": dead, "MINDFORGE_RAY_ADDRESS": dead})
    assert not down["temporal"]["up"] and not down["ray"]["up"]
