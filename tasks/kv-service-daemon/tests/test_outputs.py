"""Checks for kv-service-daemon: kvctl start/stop/status/restart and the daemon's behaviour.

Tests run in file order and share the one service. A process counts as alive when
/proc/<pid> exists and it is not a zombie: containers without a reaping init keep dead
daemons as zombies, which must not count as running.
"""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

KVCTL = "/app/kv/kvctl"
PIDFILE = Path("/run/kv.pid")
BASE = "http://127.0.0.1:7070"


def kvctl(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(
        [KVCTL, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, cwd="/"
    )


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def kvserver_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(a.endswith(b"kvserver.py") for a in argv) and alive(int(entry.name)):
                if Path(argv[0].decode()).name.startswith("python"):
                    pids.append(int(entry.name))
    return pids


def listening_inode(port: int = 7070) -> str | None:
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == f"0100007F:{port:04X}" and fields[3] == "0A":
            return fields[9]
    return None


def owns_socket(pid: int, inode: str) -> bool:
    fd_dir = Path(f"/proc/{pid}/fd")
    return any(os.readlink(fd) == f"socket:[{inode}]" for fd in fd_dir.iterdir())


def http(method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(BASE + path, data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def port_open() -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", 7070)) == 0


def pid_from_file() -> int:
    return int(PIDFILE.read_text().strip())


def test_left_running_with_correct_pidfile():
    assert http("GET", "/health") == (200, b"ok")
    pid = pid_from_file()
    assert alive(pid)
    inode = listening_inode()
    assert inode is not None, "nothing listens on 127.0.0.1:7070"
    assert owns_socket(pid, inode), "the pid file must hold the server's own pid"
    assert kvserver_pids() == [pid]


def test_status_running():
    res = kvctl("status")
    assert res.returncode == 0
    assert res.stdout.strip() == f"running {pid_from_file()}"


def test_start_is_idempotent():
    before = pid_from_file()
    res = kvctl("start")
    assert res.returncode == 0, res.stderr
    assert pid_from_file() == before
    assert kvserver_pids() == [before]


def test_data_survives_stop_start():
    key, value = f"k{uuid.uuid4().hex[:8]}", f"value {uuid.uuid4().hex}"
    assert http("PUT", f"/kv/{key}", value.encode())[0] in (200, 201, 204)
    pid = pid_from_file()
    res = kvctl("stop")
    assert res.returncode == 0, res.stderr
    assert not alive(pid)
    assert not PIDFILE.exists()
    assert not port_open()
    assert kvserver_pids() == []
    status = kvctl("status")
    assert (status.returncode, status.stdout.strip()) == (3, "stopped")
    assert json.loads(Path("/var/lib/kv/data.json").read_text())[key] == value
    assert kvctl("stop").returncode == 0  # stopping a stopped service is fine
    res = kvctl("start")
    assert res.returncode == 0, res.stderr
    assert http("GET", "/health") == (200, b"ok")  # start returns only once healthy
    assert http("GET", f"/kv/{key}") == (200, value.encode())
    assert "listening" in Path("/var/log/kv.log").read_text()


def test_stale_pidfile():
    assert kvctl("stop").returncode == 0
    dead = subprocess.Popen(["true"])
    dead.wait()
    PIDFILE.write_text(f"{dead.pid}\n")
    status = kvctl("status")
    assert (status.returncode, status.stdout.strip()) == (3, "stopped")
    res = kvctl("start")
    assert res.returncode == 0, res.stderr
    pid = pid_from_file()
    assert pid != dead.pid and alive(pid)
    assert http("GET", "/health") == (200, b"ok")


def test_restart():
    key = f"r{uuid.uuid4().hex[:8]}"
    http("PUT", f"/kv/{key}", b"kept")
    old = pid_from_file()
    res = kvctl("restart")
    assert res.returncode == 0, res.stderr
    new = pid_from_file()
    assert new != old and not alive(old) and alive(new)
    assert http("GET", f"/kv/{key}") == (200, b"kept")
    assert kvserver_pids() == [new]


def test_daemon_survives_hangup_of_callers_session():
    assert kvctl("stop").returncode == 0
    caller = subprocess.Popen(
        ["bash", "-c", f"{KVCTL} start; sleep 60"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    deadline = time.time() + 15
    while time.time() < deadline and not (PIDFILE.exists() and port_open()):
        time.sleep(0.2)
    assert port_open()
    time.sleep(0.5)
    os.killpg(caller.pid, signal.SIGHUP)
    caller.wait(timeout=10)
    time.sleep(1)
    assert http("GET", "/health") == (200, b"ok")
    assert alive(pid_from_file())
