"""The container cluster's addresses, node commands and mounts (pure: no Docker, no Ray)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from mindforge.devstack.base import DevStackError
from mindforge.devstack.cluster_nodes import (
    RAY_TOKEN_IN_NODE,
    Addresses,
    ClusterSpec,
    head_command,
    postgres_script,
    redis_command,
    worker_command,
    worker_mounts,
)
from mindforge.settings import REPO_ROOT, Settings


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_every_node_has_its_own_address_and_the_host_is_the_gateway() -> None:
    addr = Addresses.of("172.30.5.0/24", workers=16)
    members = [addr.postgres, addr.redis, addr.head, *addr.workers]
    assert addr.host == "172.30.5.1" and addr.head == "172.30.5.10" and addr.workers[-1] == "172.30.5.26"
    assert len(set(members)) == len(members) and addr.host not in members
    with pytest.raises(DevStackError, match="at least 32 addresses"):
        Addresses.of("172.30.5.0/28", workers=2)
    with pytest.raises(DevStackError, match="IPv4"):
        Addresses.of("fd00::/64", workers=2)


def test_the_head_takes_no_trial_and_keeps_its_state_in_redis() -> None:
    spec = ClusterSpec(workers=2)
    addr = Addresses.of("172.30.5.0/24", 2)
    argv, env = head_command(spec, addr)
    assert argv[:3] == ["ray", "start", "--head"]  # the image's Ray, not the host's venv
    assert _flag(argv, "--num-cpus") == "0" and "--resources" not in argv  # no CPU, no sandbox slot
    assert _flag(argv, "--node-ip-address") == addr.head
    assert env["RAY_REDIS_ADDRESS"] == f"{addr.redis}:6379" and env["RAY_external_storage_namespace"] == spec.name
    assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN_PATH"] == RAY_TOKEN_IN_NODE
    _, without = head_command(spec.model_copy(update={"gcs_fault_tolerance": False}), addr)
    assert "RAY_REDIS_ADDRESS" not in without
    assert redis_command(addr)[redis_command(addr).index("--bind") + 1] == addr.redis


def test_workers_join_the_head_by_address_with_sandbox_slots() -> None:
    spec = ClusterSpec(workers=3, cpus_per_worker=2, sandboxes_per_worker=6)
    addr = Addresses.of("172.30.5.0/24", 3)
    for index in (1, 2, 3):
        argv, env = worker_command(spec, addr, index)
        assert _flag(argv, "--address") == f"{addr.head}:6379"
        assert _flag(argv, "--node-ip-address") == addr.workers[index - 1]
        assert _flag(argv, "--num-cpus") == "2" and json.loads(_flag(argv, "--resources")) == {"sandbox": 6}
        assert int(env["RAY_gcs_rpc_server_reconnect_timeout_s"]) >= 120  # outlives a head restart
        assert "127.0.0.1" not in argv


def test_workers_mount_data_not_code_and_no_secret(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "cluster" / "mfc").mkdir(parents=True)
    (data / "cluster" / "mfc" / "database-url").write_text("postgresql+psycopg://u:pw@h/db")
    token = tmp_path / "token"
    token.write_text("t")
    settings = Settings(data_dir=data, artifact_root=tmp_path / "art")
    mounts = worker_mounts(settings, ClusterSpec(), token)
    assert str(REPO_ROOT) not in mounts and str(Path(sys.prefix)) not in mounts  # code comes from the image
    assert not [h for h in mounts if h.startswith(str(data))]  # the data dir holds the cluster's secrets
    assert mounts[str((tmp_path / "art").resolve())]["mode"] == "rw"
    assert mounts[str(REPO_ROOT / "tasks")] == {"bind": str(REPO_ROOT / "tasks"), "mode": "ro"}
    assert mounts[str(settings.image_map_file)]["mode"] == "ro"
    assert mounts[str(token)] == {"bind": RAY_TOKEN_IN_NODE, "mode": "ro"}
    assert any(m["bind"] == "/var/run/docker.sock" for m in mounts.values())
    with pytest.raises(DevStackError, match="does not exist"):
        worker_mounts(settings, ClusterSpec(data_paths=[tmp_path / "nowhere"]), token)


def test_postgres_listens_on_its_address_with_a_password_from_a_file() -> None:
    script = postgres_script()
    assert "listen_addresses=$MF_ADDR" in script and "--pwfile=" in script
    assert "scram-sha-256" in script and "127.0.0.1" not in script


@pytest.mark.parametrize("bad", [{"name": "Bad_Name"}, {"workers": 0}, {"object_store_mb": 10}, {"workers": 17}])
def test_spec_refuses_bad_values(bad: dict) -> None:
    with pytest.raises(ValidationError, match=re.escape(next(iter(bad)))):
        ClusterSpec(**bad)
