"""``mindforge dev up|down|status`` (Docker part) against the real engine of this host.

Each test points ``MINDFORGE_DATA_DIR`` at a temporary directory, so the settings file,
pid file and logs are the test's own. The engine that runs here was not started by these
tests: ``dev down`` must leave it running. A missing engine (or, for the private-engine
test, root, ``dockerd`` or ``ip``) fails the tests: the test command brings the dev stack
and the test tools up first.
"""

from __future__ import annotations

import json
import tomllib

import pytest
from typer.testing import CliRunner

from mindforge.cli.main import app
from mindforge.devstack import DevStackError, DockerComponent, write_setting
from mindforge.settings import get_settings

pytestmark = pytest.mark.docker

runner = CliRunner()


@pytest.fixture()
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MINDFORGE_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("MINDFORGE_IMAGE_MAP_ENABLED", raising=False)
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


@pytest.fixture()
def engine_up(data_dir):
    if DockerComponent(get_settings()).answers() is None:
        pytest.fail("no Docker engine answers on this host: start the dev stack with `mindforge dev up`", pytrace=False)


def _rows(output: str) -> dict[str, dict]:
    return {row["name"]: row for row in json.loads(output)}


def test_status_reports_docker_up(engine_up):
    result = runner.invoke(app, ["dev", "status", "--json", "-c", "docker"])
    assert result.exit_code == 0, result.output
    row = _rows(result.stdout)["docker"]
    assert row["up"] is True and row["address"].startswith(("unix://", "tcp://", "ssh://", "npipe://"))
    assert "Docker " in row["detail"]


def test_status_json_is_one_document_with_stable_keys(engine_up):
    from mindforge.devstack import component_names

    result = runner.invoke(app, ["dev", "status", "--json"])
    assert result.exit_code in (0, 1), result.output  # 1: a required component (e.g. Temporal) is down
    rows = json.loads(result.stdout)  # nothing else on stdout
    assert [row["name"] for row in rows] == component_names()
    assert all(set(row) == {"name", "address", "up", "required", "detail"} for row in rows)
    assert all(isinstance(row["up"], bool) and isinstance(row["required"], bool) for row in rows)


def test_status_table_lists_every_component(engine_up):
    result = runner.invoke(app, ["dev", "status"])
    for name in ("docker", "base-image", "registry"):
        assert name in result.stdout


def test_up_sets_image_map_and_is_idempotent(data_dir, engine_up):
    settings_file = data_dir / "settings.toml"
    settings_file.write_text("docker_pids_limit = 256\n", encoding="utf-8")
    args = ["dev", "up", "--json", "-c", "docker", "-c", "base-image", "-c", "registry"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    rows = _rows(first.stdout)
    assert rows["docker"]["up"] and rows["base-image"]["up"]
    saved = tomllib.loads(settings_file.read_text(encoding="utf-8"))
    assert saved["docker_pids_limit"] == 256, "other keys must be kept"
    assert saved["image_map_enabled"] is (not rows["registry"]["up"])
    get_settings.cache_clear()
    assert get_settings().image_map_enabled is saved["image_map_enabled"]

    build_log = data_dir / "logs" / "base_image.log"
    built_before = build_log.stat().st_mtime_ns if build_log.exists() else None
    second = runner.invoke(app, args)
    assert second.exit_code == 0, second.output
    # the engine was already up: nothing was started, so there is nothing to stop; the image
    # was found, not built again (what the second run does, not how long a loaded machine takes)
    assert not (data_dir / "run" / "dockerd.pid").exists()
    assert (build_log.stat().st_mtime_ns if build_log.exists() else None) == built_before
    assert _rows(second.stdout)["base-image"]["up"]


def test_down_leaves_an_engine_it_did_not_start(data_dir, engine_up):
    # a stale pid file naming a live process that is not ours (this test) must not be obeyed
    pid_file = data_dir / "run" / "dockerd.pid"
    pid_file.parent.mkdir(parents=True)
    pid_file.write_text(json.dumps({"pid": 1, "start": "no-such-start-time"}))
    result = runner.invoke(app, ["dev", "down", "-c", "docker"])
    assert result.exit_code == 0, result.output
    assert "left alone" in result.output
    assert DockerComponent(get_settings()).answers() is not None


def test_unknown_component_is_rejected(data_dir):
    result = runner.invoke(app, ["dev", "status", "-c", "bogus"])
    assert result.exit_code == 2
    assert "bogus" in result.output


def test_write_setting_keeps_keys_and_rejects_bad_toml(tmp_path):
    path = tmp_path / "settings.toml"
    write_setting(path, "image_map_enabled", True)
    write_setting(path, "base_image", "x/y:z")
    assert tomllib.loads(path.read_text()) == {"image_map_enabled": True, "base_image": "x/y:z"}
    assert write_setting(path, "base_image", "x/y:z") is False  # already so: the file is left alone
    assert write_setting(path, "base_image", "x/y:w") is True
    path.write_text("not = [toml", encoding="utf-8")
    with pytest.raises(DevStackError, match="not valid TOML"):
        write_setting(path, "image_map_enabled", False)


def test_registry_line_is_said_once_per_change(data_dir):
    """``dev up`` explains the image map when it sets it; a second ``dev up`` (the main job runs two) is quiet."""
    from mindforge.devstack.sandbox import RegistryComponent

    first: list[str] = []
    row = RegistryComponent(get_settings()).up(first.append)
    assert len(first) == 1 and "image map" in first[0]
    again: list[str] = []
    assert RegistryComponent(get_settings()).up(again.append) == row and again == []
    assert "image map" in row.detail


@pytest.mark.slow
def test_up_starts_and_down_stops_a_private_engine(monkeypatch, tmp_path):
    """``up`` starts dockerd, records its pid, is quick the second time; ``down`` stops it.

    The engine is a second, private dockerd (own socket, data root, exec root) so that the
    host's engine is never touched. It gets its own pre-made bridge and no iptables or
    forwarding changes: a dockerd started with ``--bridge none`` deletes the host's
    ``docker0``, and the default bridge would be shared with the host's engine.
    """
    import os
    import shutil
    import signal
    import subprocess
    import tempfile
    import uuid

    needs = (("root", os.geteuid() == 0), ("dockerd", shutil.which("dockerd")), ("ip", shutil.which("ip")))
    missing = [what for what, ok in needs if not ok]
    if missing:
        pytest.fail(
            f"a private dockerd needs root, dockerd and ip; missing: {', '.join(missing)} "
            "(`mindforge dev up` installs dockerd, deploy/install_test_tools.sh installs iproute2)",
            pytrace=False,
        )
    root = tempfile.mkdtemp(prefix="mfd", dir="/tmp")  # short: unix socket paths are capped
    bridge = f"mfbr{uuid.uuid4().hex[:8]}"
    sock = f"unix://{root}/docker.sock"
    monkeypatch.setenv("DOCKER_HOST", sock)
    monkeypatch.setenv("MINDFORGE_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    argv = [
        "dockerd", "--host", sock, "--data-root", f"{root}/data", "--exec-root", f"{root}/exec",
        "--pidfile", f"{root}/docker.pid", "--bridge", bridge,
        "--iptables=false", "--ip-masq=false", "--ip-forward=false",
    ]
    subprocess.run(["ip", "link", "add", "name", bridge, "type", "bridge"], check=True)
    component = DockerComponent(get_settings(), dockerd_argv=argv)
    pid = None
    try:
        assert not component.status().up
        row = component.up(lambda _: None)
        assert row.up and "started by mindforge" in row.detail
        pid = json.loads((tmp_path / "run" / "dockerd.pid").read_text())["pid"]
        assert (tmp_path / "logs" / "dockerd.log").is_file()
        # a second up finds the engine it started and starts no other
        assert component.up(lambda _: None).up
        assert json.loads((tmp_path / "run" / "dockerd.pid").read_text())["pid"] == pid
        row = component.down(lambda _: None)
        assert not row.up and not (tmp_path / "run" / "dockerd.pid").exists()
    finally:
        from mindforge.sandbox.owner import process_start_time

        if pid is not None and process_start_time(pid) is not None:
            os.kill(pid, signal.SIGKILL)
        subprocess.run(["ip", "link", "del", bridge], check=False)
        shutil.rmtree(root, ignore_errors=True)
        get_settings.cache_clear()
