"""Run a policy server in-process (uvicorn in a thread) or as a subprocess, and wait for it.

Both the embedded server (:mod:`mindforge.policy.server.server`) and the scripted test policy
(:mod:`mindforge.policy.doubles.scripted`) are FastAPI apps; this module starts either one, and
puts each behind the same listening rules (:func:`mindforge.policy.server.auth.protect`):
loopback unless told otherwise, an API key beyond it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import uvicorn
from pydantic import SecretStr

from mindforge.errors import InfraError
from mindforge.policy.server.auth import as_secret, bearer_headers, protect, settings_key
from mindforge.settings import POLICY_API_KEY_ENV


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (another process may still take it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def wait_until_ready(
    base_url: str, timeout_sec: float, proc: subprocess.Popen | None = None, api_key: SecretStr | str | None = None
) -> None:
    """Poll ``{base_url}/models`` until it answers 200.

    Args:
        base_url: the server's OpenAI base URL, ending in ``/v1``.
        timeout_sec: how long to wait, in seconds.
        proc: the server process, if any; its early exit ends the wait.
        api_key: the server's API key, sent as ``Authorization: Bearer``; None sends none.

    Raises:
        InfraError: the server did not answer in time, or its process exited.
    """
    deadline = time.monotonic() + timeout_sec
    last = "no answer"
    headers = bearer_headers(api_key)
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise InfraError(f"policy server exited with code {proc.returncode} before {base_url} answered")
        try:
            resp = httpx.get(f"{base_url}/models", headers=headers, timeout=2.0)
            if resp.status_code == 200:
                return
            last = f"HTTP {resp.status_code}"
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        time.sleep(0.1)
    raise InfraError(f"policy server at {base_url} did not answer within {timeout_sec:.0f} s ({last})")


def serve_app(app, host: str, port: int, api_key: SecretStr | str | None, *, log_level: str = "info") -> None:
    """Serve ``app`` with uvicorn in the foreground until interrupted, behind :func:`protect`.

    Args:
        app: a FastAPI app.
        host / port: where to listen.
        api_key: the key clients must send (``Authorization: Bearer``); None or empty for none.
        log_level: uvicorn's log level (the access log stays off).

    Raises:
        UnprotectedBindError: ``host`` is beyond loopback and there is no key.
    """
    protect(app, host, api_key)
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False)


class ServerHandle:
    """A FastAPI app served by uvicorn in a background thread.

    Args:
        app: the app to serve.
        host: address to listen on (loopback by default; beyond it ``api_key`` is required).
        port: TCP port; 0 picks a free one.
        api_key: the key clients must send (``Authorization: Bearer``); None or empty for none.
        ready_timeout_sec: how long to wait for uvicorn to start, in seconds.

    Attributes:
        app: the served app.
        host / port: where it listens (the real port when 0 was asked for).
        base_url: the OpenAI base URL, ``http://host:port/v1``.

    Raises:
        UnprotectedBindError: ``host`` is beyond loopback and there is no key.
        InfraError: uvicorn did not start in time.
    """

    def __init__(
        self,
        app,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        api_key: SecretStr | str | None = None,
        ready_timeout_sec: float = 30.0,
    ) -> None:
        protect(app, host, api_key)
        self.app = app
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self.host = host
        self.port = int(self._sock.getsockname()[1])
        self.base_url = f"http://{host}:{self.port}/v1"
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, name=f"policy-server-{self.port}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + ready_timeout_sec
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise InfraError(f"policy server on {host}:{self.port} did not start")
            time.sleep(0.02)

    def stop(self, timeout_sec: float = 10.0) -> None:
        """Ask uvicorn to exit and wait up to ``timeout_sec`` seconds for the thread."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout_sec)
        self._sock.close()

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class PolicyServerProcess:
    """A policy server in a child process (``python -m <module> ... --port N``).

    Use it where the server must outlive or be isolated from the caller, e.g. for Ray
    workers in other processes. The child's output goes to ``log_path`` (or is dropped).

    Args:
        module: ``mindforge.policy.server`` or ``mindforge.policy.doubles.scripted``.
        args: extra command-line arguments (``--model tiny``, ``--script FILE``).
        host: address to listen on.
        port: TCP port; 0 picks a free one.
        ready_timeout_sec: how long :meth:`start` waits for ``/v1/models``, in seconds.
        log_path: file for the child's stdout and stderr.
        env: extra environment variables for the child.
        api_key: the key the child requires and :meth:`start` sends (it reaches the child
            in its environment, never on its command line); None: settings' ``policy_api_key``.
    """

    def __init__(
        self,
        module: str,
        args: list[str],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ready_timeout_sec: float = 120.0,
        log_path: Path | None = None,
        env: dict[str, str] | None = None,
        api_key: SecretStr | str | None = None,
    ) -> None:
        self.module = module
        self.args = list(args)
        self.host = host
        self.port = port or free_port(host)
        self.base_url = f"http://{host}:{self.port}/v1"
        self.ready_timeout_sec = ready_timeout_sec
        self.log_path = log_path
        self.env = dict(env or {})
        self._api_key = as_secret(api_key) if api_key is not None else settings_key()
        self.proc: subprocess.Popen | None = None

    def start(self) -> PolicyServerProcess:
        """Start the child and wait until it answers.

        Raises:
            InfraError: it exited or did not answer within ``ready_timeout_sec``.
        """
        cmd = [sys.executable, "-m", self.module, *self.args, "--host", self.host, "--port", str(self.port)]
        env = {**os.environ, **self.env}
        if self._api_key is not None:
            env[POLICY_API_KEY_ENV] = self._api_key.get_secret_value()
        log = open(self.log_path, "ab") if self.log_path else None  # noqa: SIM115 - closed below, once the child has it
        out = log if log is not None else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        finally:
            if log is not None:
                log.close()
        try:
            wait_until_ready(self.base_url, self.ready_timeout_sec, self.proc, self._api_key)
        except InfraError:
            self.stop()
            raise
        return self

    def exited(self) -> int | None:
        """The child's exit code when it was started and has exited since, else None."""
        return None if self.proc is None else self.proc.poll()

    def revive(self) -> int | None:
        """Start the child again on the same port when it has exited (a crash, an OOM kill).

        The owner calls this from its own watch (``mindforge quickstart`` does, between
        status polls). The new process serves the base model only: adapters loaded at run
        time are loaded again by whoever needs them (``run_trials`` loads the pair's
        registered adapter before its trials: :mod:`workers.trial_activities`).

        Returns:
            the exit code of the process that died, or None when it is running (nothing done).

        Raises:
            InfraError: the new process exited or did not answer within ``ready_timeout_sec``.
        """
        code = self.exited()
        if code is None:
            return None
        self.start()
        return code

    def stop(self, timeout_sec: float = 10.0) -> None:
        """Terminate the child (SIGTERM, then SIGKILL after ``timeout_sec`` seconds)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout_sec)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout_sec)

    def __enter__(self) -> PolicyServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
