"""Where MindForge's servers listen: loopback unless told otherwise, and an API key beyond it.

(a) Every listening socket of these processes is on loopback, read with psutil and
    filtered by their pids:

    - the dev stack's Temporal dev server and Ray head, as this checkout's data dir knows
      them (``<data dir>/temporal/server.pid``; the Ray head's processes from the one
      listening on the GCS port of ``ray_address``), never restarted here;
    - a Temporal dev server the dev stack's own component starts for this test;
    - a Ray head started with the dev stack's own ``ray start`` command and environment
      (:func:`~mindforge.devstack.services.ray_head_command`; a private temp dir and
      ports so it stands beside the shared head, stopped by its pids, never ``ray stop``);
    - a Ray local cluster started by a worker's ``init_ray("local")``;
    - the embedded policy server on its default host, and the scripted double.

(b) The scripted double on ``0.0.0.0`` with a key refuses requests without it or with a
    wrong one (401) and answers with it, also through the real clients (the OpenAI SDK via
    ``resolve_endpoint``, the adapter hand-off); without a key the double and the embedded
    server refuse to start. The refusal and the check are one code path for both servers
    (:mod:`mindforge.policy.server.auth`, via the runner).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import httpx
import openai
import psutil
import pytest
from pydantic import SecretStr

from mindforge.agent.endpoint import resolve_endpoint
from mindforge.devstack.services import TemporalComponent, _pid_alive, ray_head_command
from mindforge.errors import InfraError
from mindforge.hcp import load_contract
from mindforge.listen import is_loopback
from mindforge.policy.doubles.scripted import start_scripted_policy
from mindforge.policy.handoff import ServingError, load_adapter, served_adapters
from mindforge.policy.server.runner import PolicyServerProcess, free_port, wait_until_ready
from mindforge.settings import get_settings
from tests.conftest import REPO, temporal_settings

pytestmark = [pytest.mark.slow]

#: the dev stack's data dir, read before the session fixture points MINDFORGE_DATA_DIR elsewhere
DEV_DATA_DIR = Path(os.environ.get("MINDFORGE_DATA_DIR") or REPO / ".mindforge")
KEY = "sk-listen-test-0b1d"
SCRIPT = {"rules": [], "default": {"content": "hello"}}


def listening(pids: set[int]) -> list[tuple[str, int, int]]:
    """``(address, port, pid)`` of every TCP socket these processes listen on."""
    return sorted(
        (c.laddr.ip, c.laddr.port, c.pid)
        for c in psutil.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.pid in pids
    )


def beyond_loopback(socks: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    return [s for s in socks if not is_loopback(s[0])]


def ray_head_pids(gcs_port: int) -> set[int]:
    """The processes of the Ray head whose GCS listens on ``gcs_port``: same session or node id, and their children."""
    conns = psutil.net_connections(kind="tcp")
    gcs = {c.pid for c in conns if c.status == psutil.CONN_LISTEN and c.laddr.port == gcs_port}
    assert gcs, f"nothing listens on the Ray GCS port {gcs_port}"
    args = psutil.Process(gcs.pop()).cmdline()
    marks = [a.split("=", 1)[1] for a in args if a.startswith(("--session-dir=", "--node-id="))]
    assert marks, args
    pids = set()
    for proc in psutil.process_iter(["cmdline"]):
        if any(m in " ".join(proc.info["cmdline"] or []) for m in marks):
            pids.add(proc.pid)
            pids.update(c.pid for c in proc.children(recursive=True))
    return pids


def routable_ip() -> str | None:
    """This machine's first non-loopback IPv4 address, if it has one."""
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family == socket.AF_INET and not is_loopback(a.address):
                return a.address
    return None


# ------------------------------------------------------------------ (a) loopback by default
@pytest.mark.temporal
@pytest.mark.ray
def test_the_shared_dev_stack_listens_on_loopback_only() -> None:
    pid = _pid_alive(DEV_DATA_DIR / "temporal" / "server.pid")
    assert pid, f"no Temporal dev server from {DEV_DATA_DIR} (run `mindforge dev up`)"
    temporal = listening({pid})
    assert temporal and not beyond_loopback(temporal), temporal
    settings_file = DEV_DATA_DIR / "settings.toml"
    address = tomllib.loads(settings_file.read_text())["ray_address"] if settings_file.is_file() else "local"
    assert address != "local", f"{settings_file}: no Ray head address (run `mindforge dev up`)"
    ray = listening(ray_head_pids(int(address.rpartition(":")[2])))
    assert ray and not beyond_loopback(ray), f"the Ray head listens beyond loopback: {beyond_loopback(ray)}"


@pytest.mark.temporal
def test_a_temporal_dev_server_the_dev_stack_starts_listens_on_loopback_only(tmp_path) -> None:
    comp = TemporalComponent(temporal_settings(tmp_path))
    said: list[str] = []
    try:
        assert comp.up(said.append).up, said
        pid = _pid_alive(tmp_path / "temporal" / "server.pid")
        socks = listening({pid} if pid else set())
        ports = {p for _ip, p, _pid in socks}
        assert comp.host_port[1] in ports and 0 < len(socks)  # the frontend, the Web UI and the internal ones
        assert not beyond_loopback(socks), socks
    finally:
        comp.down(said.append)


def _stop(pids: set[int]) -> None:
    procs = [psutil.Process(p) for p in pids if psutil.pid_exists(p)]
    for proc in procs:
        proc.terminate()
    _gone, alive = psutil.wait_procs(procs, timeout=15)
    for proc in alive:
        proc.kill()
    psutil.wait_procs(alive, timeout=15)


@pytest.mark.ray
def test_a_ray_head_started_as_the_dev_stack_starts_it_listens_on_loopback_only() -> None:
    argv, extra = ray_head_command("127.0.0.1", free_port(), 1)
    gcs_port = int(argv[argv.index("--port") + 1])
    temp = tempfile.mkdtemp(prefix="mfray", dir="/tmp")  # short: Ray's socket paths live under it
    private = ["--temp-dir", temp, "--ray-client-server-port", str(free_port()),
               "--dashboard-agent-listen-port", str(free_port()), "--dashboard-port", str(free_port())]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    out = subprocess.run([*argv, *private], env={**env, **extra}, capture_output=True, text=True, timeout=180)
    pids: set[int] = set()
    try:
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        # `ray start` returns before every process of the head listens: look until three do (30 s)
        deadline = time.monotonic() + 30
        while True:
            pids = ray_head_pids(gcs_port)
            socks = listening(pids)
            if len({pid for *_x, pid in socks}) >= 3 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert gcs_port in {p for _ip, p, _pid in socks} and len({pid for *_x, pid in socks}) >= 3, socks
        assert not beyond_loopback(socks), socks
    finally:
        _stop(pids or ray_head_pids_or_none(gcs_port))
        shutil.rmtree(temp, ignore_errors=True)


def ray_head_pids_or_none(gcs_port: int) -> set[int]:
    try:
        return ray_head_pids(gcs_port)
    except AssertionError:
        return set()


LOCAL_RAY = """
import json, os, psutil
from workers.main import init_ray
init_ray("local")
import ray
me = psutil.Process()
pids = {me.pid, *(c.pid for c in me.children(recursive=True))}
print(json.dumps({"env": os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"),
    "socks": [[c.laddr.ip, c.laddr.port] for c in psutil.net_connections(kind="tcp")
              if c.status == psutil.CONN_LISTEN and c.pid in pids]}))
ray.shutdown()
"""


@pytest.mark.ray
def test_a_workers_local_ray_cluster_listens_on_loopback_only() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINDFORGE_", "RAY_"))}
    out = subprocess.run(
        [sys.executable, "-c", LOCAL_RAY], cwd=REPO, capture_output=True, text=True, timeout=180,
        env={**env, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["env"] == "0" and seen["socks"], seen
    assert [s for s in seen["socks"] if not is_loopback(s[0])] == [], seen["socks"]


def test_policy_servers_listen_on_loopback_by_default(settings, tmp_path) -> None:
    with start_scripted_policy(SCRIPT) as double:
        socks = [s for s in listening({os.getpid()}) if s[1] == double.port]
        assert socks and not beyond_loopback(socks), socks
    port = free_port()
    log = (tmp_path / "policy.log").open("wb")
    proc = subprocess.Popen(  # the embedded server's own default --host
        [sys.executable, "-m", "mindforge.policy.server", "--model", "tiny", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        wait_until_ready(f"http://127.0.0.1:{port}/v1", 300, proc)
        socks = listening({proc.pid})
        assert [s[:2] for s in socks] == [("127.0.0.1", port)], socks
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


# ------------------------------------------------------------------ (b) a key beyond loopback
def test_a_policy_server_on_all_interfaces_answers_only_with_its_key(settings, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MINDFORGE_POLICY_API_KEY", KEY)
    get_settings.cache_clear()
    try:
        with start_scripted_policy(SCRIPT, host="0.0.0.0") as double:
            socks = [s for s in listening({os.getpid()}) if s[1] == double.port]
            assert [s[0] for s in socks] == ["0.0.0.0"], socks
            urls = [f"http://127.0.0.1:{double.port}/v1"]
            if (ip := routable_ip()) is not None:
                urls.append(f"http://{ip}:{double.port}/v1")  # reached from beyond loopback
            for url in urls:
                assert httpx.get(f"{url}/models").status_code == 401
                bad = httpx.get(f"{url}/models", headers={"Authorization": "Bearer not-the-key"})
                assert bad.status_code == 401 and bad.json()["error"]["type"] == "AuthenticationError"
                assert httpx.get(f"{url}/models", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
            _clients_send_the_key(urls[0], tmp_path)
    finally:
        get_settings.cache_clear()


def _clients_send_the_key(url: str, tmp_path: Path) -> None:
    contract = load_contract(REPO / "hcp_contracts" / "baseline.toml")
    base_url, key = resolve_endpoint(contract, url)  # what the agent loop, proposals and the judge use
    assert key == KEY
    reply = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0).chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.choices[0].message.content == "hello"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=url, api_key="EMPTY", max_retries=0).models.list()
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    assert load_adapter(url, "listen-g0-r0", adapter, api_key=key) == "loaded"  # the adapter hand-off
    assert served_adapters(url, api_key=key) == {"listen-g0-r0": str(adapter)}
    with pytest.raises(ServingError, match="HTTP 401"):
        served_adapters(url)


def test_both_servers_refuse_to_listen_beyond_loopback_without_a_key(settings, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("MINDFORGE_POLICY_API_KEY", raising=False)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    began = time.monotonic()
    out = subprocess.run(  # the embedded server refuses before it loads a model
        [sys.executable, "-m", "mindforge.policy.server", "--model", "tiny", "--host", "0.0.0.0", "--port", "0"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 2 and "MINDFORGE_POLICY_API_KEY" in out.stderr, out.stderr[-2000:]
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    log = tmp_path / "double.log"
    with pytest.raises(InfraError, match="exited with code 2"):
        PolicyServerProcess(
            "mindforge.policy.doubles.scripted", ["--script", str(script)], host="0.0.0.0", log_path=log
        ).start()
    assert "MINDFORGE_POLICY_API_KEY" in log.read_text()
    # with a key (handed to the child in its environment) the same double starts and answers with it
    with PolicyServerProcess(
        "mindforge.policy.doubles.scripted", ["--script", str(script)], host="0.0.0.0", api_key=SecretStr(KEY)
    ) as double:
        assert KEY not in " ".join(psutil.Process(double.proc.pid).cmdline())
        assert httpx.get(f"{double.base_url}/models").status_code == 401
    assert time.monotonic() - began < 110
