"""The container cluster's node commands and mounts (pure: no Docker, no Ray)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from mindforge.devstack.cluster import ClusterSpec, _ray_command, head_temp_dir, shared_mounts
from mindforge.devstack.services import RAY_HEAD_PORT
from mindforge.settings import REPO_ROOT, Settings


def _ports(cmd: list[str]) -> set[int]:
    flags = ("--port", "--ray-client-server-port", "--dashboard-agent-listen-port")
    ports = {int(cmd[i + 1]) for i, a in enumerate(cmd) if a in flags}
    lo, hi = int(cmd[cmd.index("--min-worker-port") + 1]), int(cmd[cmd.index("--max-worker-port") + 1])
    return ports | set(range(lo, hi + 1))


def test_nodes_use_disjoint_ports_apart_from_the_dev_head() -> None:
    spec = ClusterSpec(workers=16)
    # the default cluster beside the e2e test's and the benchmark's (other GCS ports): no port shared
    others = [ClusterSpec(workers=16, gcs_port=p, client_port=p + 4000) for p in (6490, 6495, 6519)]
    sets = [_ports(_ray_command(c, i)) for c in (spec, *others) for i in range(c.workers + 1)]
    commands = [_ray_command(spec, i) for i in range(spec.workers + 1)]
    for i, a in enumerate(sets):
        assert RAY_HEAD_PORT not in a and 52365 not in a  # the dev head's GCS and dashboard agent
        for b in sets[i + 1:]:
            assert not a & b
    head, *workers = commands
    assert "--head" in head and head[head.index("--num-cpus") + 1] == "0"  # trials run on workers only
    assert head[head.index("--temp-dir") + 1] == str(head_temp_dir(spec.name))
    assert all(w[w.index("--address") + 1] == f"127.0.0.1:{spec.gcs_port}" for w in workers)
    assert all(c[0] == str(Path(sys.prefix) / "bin" / "ray") for c in commands)  # the host venv's Ray


def test_mounts_keep_host_paths_code_read_only_artifacts_writable(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", artifact_root=tmp_path / "art")
    mounts = shared_mounts(settings)
    for host, m in mounts.items():
        if not host.endswith(".sock") and "auth_token" not in host:
            assert m["bind"] == host  # records and the venv hold absolute paths
    assert mounts[str(REPO_ROOT)]["mode"] == mounts[str(Path(sys.prefix))]["mode"] == "ro"
    assert mounts[str(tmp_path / "art")]["mode"] == "rw"
    assert any(m["bind"] == "/var/run/docker.sock" for m in mounts.values())


@pytest.mark.parametrize("bad", [{"name": "Bad_Name"}, {"workers": 0}, {"object_store_mb": 10}])
def test_spec_refuses_bad_values(bad: dict) -> None:
    with pytest.raises(ValidationError, match=re.escape(next(iter(bad)))):
        ClusterSpec(**bad)
