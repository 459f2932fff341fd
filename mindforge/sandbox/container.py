"""One running Docker container: exec, files in and out, process usage, teardown.

:class:`DockerSandbox` is what :meth:`mindforge.sandbox.docker.DockerEngine.start` returns.
API round trips are kept low because a trial is short: ``exec`` is exec-create +
exec-start (the exit status travels in the output, see :mod:`mindforge.sandbox.output`),
a file copy is one archive call, a directory check one ``HEAD``, teardown one forced remove.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import docker
import docker.errors

from mindforge.errors import InfraError
from mindforge.sandbox import archive
from mindforge.sandbox.base import (
    DEFAULT_MAX_OUTPUT_BYTES,
    ExecResult,
    PidsUsage,
    Sandbox,
)
from mindforge.sandbox.output import (
    EXEC_SCRIPT,
    cap_bytes,
    parse_exec_output,
    split_budget,
)
from mindforge.sandbox.pids import docker_pids_usage

logger = logging.getLogger(__name__)

#: extra seconds the client waits past a command's timeout before giving up on the engine
EXEC_GRACE_SEC = 60.0
#: Go's os.ModeDir: the directory bit of the mode in Docker's path stat
GO_MODE_DIR = 1 << 31


class DockerSandbox(Sandbox):
    """One running container (see :class:`mindforge.sandbox.base.Sandbox`).

    Args:
        api: the low-level client it talks through.
        container_id: the running container.
    """

    def __init__(self, api: docker.APIClient, container_id: str) -> None:
        self.api = api
        self.container_id = container_id
        #: seconds the task's instance steps took at start (0.0 without steps)
        self.instance_steps_sec = 0.0
        self._closed = False
        self._close_lock = threading.Lock()

    def exec(
        self,
        command: str,
        *,
        timeout_sec: float,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        truncation: str = "head_tail",
    ) -> ExecResult:
        """See :meth:`Sandbox.exec`. Two API calls (three when the wrapper could not run).

        Raises:
            InfraError: the engine failed, or gave no answer ``EXEC_GRACE_SEC`` past the
                timeout.
            ValueError: ``timeout_sec`` is not positive, or an unknown ``truncation``.
        """
        if not timeout_sec > 0:
            raise ValueError(f"timeout_sec must be > 0, got {timeout_sec}")
        head_n, tail_n = split_budget(max_output_bytes, truncation)
        argv = ["bash", "-c", EXEC_SCRIPT, "mindforge-exec", command, f"{timeout_sec:.3f}", str(head_n), str(tail_n)]
        start = time.monotonic()
        try:
            exec_id = self.api.exec_create(
                self.container_id,
                argv,
                stdout=True,
                stderr=True,
                environment=env or None,
                workdir=workdir,
                user=user or "",
            )["Id"]
            stream = self.api.exec_start(exec_id, stream=True, demux=True)
        except docker.errors.APIError as exc:
            raise InfraError(f"exec in sandbox {self.container_id[:12]} failed: {exc}") from exc
        expired = threading.Event()

        def give_up() -> None:
            expired.set()
            stream.close()

        timer = threading.Timer(timeout_sec + EXEC_GRACE_SEC, give_up)
        timer.daemon = True
        timer.start()
        out: list[bytes] = []
        err: list[bytes] = []
        try:
            for chunk_out, chunk_err in stream:
                if chunk_out:
                    out.append(chunk_out)
                if chunk_err:
                    err.append(chunk_err)
        finally:
            timer.cancel()
            stream.close()
        duration = time.monotonic() - start
        if expired.is_set():
            raise InfraError(
                f"the engine gave no result {timeout_sec + EXEC_GRACE_SEC:g} s into a {timeout_sec:g} s command"
            )
        raw = b"".join(out)
        parsed = parse_exec_output(raw, head_n, tail_n)
        if parsed is None:
            return self._unwrapped_result(exec_id, raw, b"".join(err), max_output_bytes, duration, truncation)
        return ExecResult(
            exit_code=parsed.exit_code,
            stdout=parsed.stdout.text,
            stderr=parsed.stderr.text,
            stdout_bytes=parsed.stdout.total_bytes,
            stderr_bytes=parsed.stderr.total_bytes,
            stdout_omitted_bytes=parsed.stdout.omitted_bytes,
            stderr_omitted_bytes=parsed.stderr.omitted_bytes,
            timed_out=parsed.timed_out,
            duration_sec=duration,
        )

    def _unwrapped_result(
        self, exec_id: str, out: bytes, err: bytes, cap: int, duration: float, truncation: str
    ) -> ExecResult:
        """The wrapper did not run (no bash, bad user or workdir): report what the engine said."""
        try:
            info = self.api.exec_inspect(exec_id)
        except docker.errors.APIError as exc:
            raise InfraError(f"exec inspect in sandbox {self.container_id[:12]} failed: {exc}") from exc
        if info.get("Running"):
            raise InfraError("exec stream ended while the command still runs")
        so, se = cap_bytes(out, cap, truncation), cap_bytes(err, cap, truncation)
        return ExecResult(
            exit_code=info.get("ExitCode"),
            stdout=so.text,
            stderr=se.text,
            stdout_bytes=so.total_bytes,
            stderr_bytes=se.total_bytes,
            stdout_omitted_bytes=so.omitted_bytes,
            stderr_omitted_bytes=se.omitted_bytes,
            duration_sec=duration,
        )

    # ------------------------------------------------------------------ files

    def put_dir(self, local_dir: Path, sandbox_dir: str) -> None:
        """See :meth:`Sandbox.put_dir`. Files land owned by root with their local modes.

        Raises:
            InfraError: the engine failed.
            FileNotFoundError: ``local_dir`` is not a directory.
        """
        self._put_archive(archive.dir_archive(local_dir, sandbox_dir))

    def put_file(self, sandbox_path: str, data: bytes, mode: int = 0o644) -> None:
        """See :meth:`Sandbox.put_file` (owned by root).

        Raises:
            InfraError: the engine failed.
        """
        self._put_archive(archive.file_archive(sandbox_path, data, mode))

    def _put_archive(self, data: bytes) -> None:
        try:
            self.api.put_archive(self.container_id, "/", data)
        except docker.errors.APIError as exc:
            raise InfraError(f"copy into sandbox {self.container_id[:12]} failed: {exc}") from exc

    def get_file(self, sandbox_path: str, max_bytes: int = 10 * 1024 * 1024) -> bytes | None:
        """See :meth:`Sandbox.get_file`.

        Raises:
            InfraError: the engine failed, the path is not a regular file, or the file is
                larger than ``max_bytes``.
        """
        try:
            stream, stat = self.api.get_archive(self.container_id, sandbox_path)
        except docker.errors.NotFound:
            return None
        except docker.errors.APIError as exc:
            raise InfraError(f"copy from sandbox {self.container_id[:12]} failed: {exc}") from exc
        if stat.get("size", 0) > max_bytes:
            stream.close()  # drop the connection rather than read a big file
            raise InfraError(f"{sandbox_path}: {stat['size']} bytes, more than the {max_bytes} allowed")
        data = archive.single_file(b"".join(stream))
        if data is None:
            raise InfraError(f"{sandbox_path}: not a regular file in the sandbox")
        return data

    def is_dir(self, sandbox_path: str) -> bool:
        """See :meth:`Sandbox.is_dir`: one ``HEAD`` of the archive endpoint (:meth:`stat`), no exec.

        Raises:
            InfraError: the engine failed.
        """
        found = self.stat(sandbox_path)
        return found is not None and bool(found["mode"] & GO_MODE_DIR)

    def stat(self, sandbox_path: str) -> dict[str, Any] | None:
        """Docker's stat of a path in the container (``name``, ``size``, ``mode`` as Go's FileMode,
        ``mtime``, ``linkTarget``), or None when it does not exist. Works on a container not started yet.

        Raises:
            InfraError: the engine failed.
        """
        try:
            # docker-py has no call for HEAD /containers/{id}/archive (the path's stat, no body)
            url = f"{self.api.base_url}/v{self.api.api_version}/containers/{self.container_id}/archive"
            res = self.api.head(url, params={"path": sandbox_path})
        except Exception as exc:  # noqa: BLE001 - requests raises several types here
            raise InfraError(f"stat in sandbox {self.container_id[:12]} failed: {exc}") from exc
        if res.status_code == 404:
            return None
        header = res.headers.get("X-Docker-Container-Path-Stat")
        if res.status_code != 200 or not header:
            raise InfraError(
                f"stat of {sandbox_path} in sandbox {self.container_id[:12]} failed: HTTP {res.status_code}"
            )
        found: dict[str, Any] = json.loads(base64.b64decode(header))
        return found

    # ------------------------------------------------------------------ processes

    def pids_usage(self) -> PidsUsage | None:
        """See :meth:`Sandbox.pids_usage` and :func:`mindforge.sandbox.pids.docker_pids_usage`.

        Raises:
            InfraError: the engine failed.
        """
        return docker_pids_usage(self.api, self.container_id)

    # ------------------------------------------------------------------ teardown

    def close(self) -> float:
        """Remove the container at once (forced; no stop timeout). Idempotent.

        Returns:
            seconds spent (0.0 when already closed).
        """
        with self._close_lock:
            if self._closed:
                return 0.0
            start = time.monotonic()
            try:
                self.api.remove_container(self.container_id, force=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                # the reaper of a later engine removes it; the trial's result stands
                logger.warning("removing sandbox %s failed: %s", self.container_id[:12], exc)
            self._closed = True
            return time.monotonic() - start

