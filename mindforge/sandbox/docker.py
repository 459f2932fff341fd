"""The Docker sandbox: one container per trial, driven through the Docker SDK.

API round trips are kept low because a trial is short: starting is create + start,
``exec`` is exec-create + exec-start (the exit status travels in the output, see
:mod:`mindforge.sandbox.output`), a file copy is one archive call, teardown one forced
remove. Containers carry owner labels (:mod:`mindforge.sandbox.owner`) so that a new
engine on the same host removes those a dead process left behind.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from pathlib import Path

import docker
import docker.errors
from docker.utils import kwargs_from_env

from mindforge.errors import InfraError
from mindforge.sandbox import archive, owner
from mindforge.sandbox.base import (
    DEFAULT_MAX_OUTPUT_BYTES,
    ExecResult,
    PidsUsage,
    Sandbox,
)
from mindforge.sandbox.build import (
    BuildFailed,
    BuildResult,
    BuildTimeout,
    build_task_image,
)
from mindforge.sandbox.output import (
    EXEC_SCRIPT,
    cap_bytes,
    parse_exec_output,
    split_budget,
)
from mindforge.sandbox.pids import docker_pids_usage
from mindforge.settings import Settings
from mindforge.tasks.image_map import ImageMap
from mindforge.tasks.model import NetworkMode, Task

__all__ = [
    "BuildFailed",
    "BuildResult",
    "BuildTimeout",
    "DockerEngine",
    "DockerSandbox",
    "SandboxStartError",
]

logger = logging.getLogger(__name__)

#: extra seconds the client waits past a command's timeout before giving up on the engine
EXEC_GRACE_SEC = 60.0


class SandboxStartError(InfraError):
    """The trial's container could not be created or started."""


class DockerEngine:
    """A connection to one Docker engine that builds task images and starts sandboxes.

    Args:
        pids_limit: most processes per container (``settings.docker_pids_limit``).
        base_url: engine address (``unix:///var/run/docker.sock``); default from the
            environment (``DOCKER_HOST``), as the ``docker`` CLI does.
        reap: remove orphaned MindForge containers of this host on start-up.

    Raises:
        InfraError: no engine answers.
    """

    def __init__(self, *, pids_limit: int = 512, base_url: str | None = None, reap: bool = True) -> None:
        self.pids_limit = pids_limit
        self._client_kwargs = kwargs_from_env()
        if base_url:
            self._client_kwargs["base_url"] = base_url
        try:
            self.client = docker.DockerClient(**self._client_kwargs, version="auto")
            self.client.api.ping()
        except Exception as exc:  # noqa: BLE001 - docker-py raises several types here
            raise InfraError(
                f"no Docker engine answers at {self._client_kwargs.get('base_url', 'the default socket')}: "
                f"{exc} (start one with `mindforge dev up`)"
            ) from exc
        self.api_version = self.client.api.api_version
        if reap:
            self.reap_orphans()

    @classmethod
    def from_settings(cls, settings: Settings, *, reap: bool = True) -> DockerEngine:
        """An engine configured from settings (``docker_pids_limit``)."""
        return cls(pids_limit=settings.docker_pids_limit, reap=reap)

    def _new_api_client(self, timeout: float | None = None) -> docker.APIClient:
        return docker.APIClient(
            **self._client_kwargs,
            version=self.api_version,
            timeout=timeout or 60,  # type: ignore[arg-type]  # stubs say int; docker-py passes it to requests (float s)
        )

    def close(self) -> None:
        """Close the connection (sandboxes already started keep working until closed)."""
        self.client.close()

    # ------------------------------------------------------------------ orphans

    def reap_orphans(self) -> list[str]:
        """Remove this host's MindForge containers whose owning process is gone.

        Returns:
            ids of the removed containers.

        Raises:
            InfraError: the engine failed.
        """
        if not owner.can_check_owners():
            logger.warning("cannot read process start times here; orphaned containers are not reaped")
            return []
        try:
            found = self.client.api.containers(all=True, filters={"label": f"{owner.MANAGED}=true"})
        except docker.errors.APIError as exc:
            raise InfraError(f"listing containers failed: {exc}") from exc
        removed = []
        for info in found:
            if owner.is_orphan(info.get("Labels") or {}):
                try:
                    self.client.api.remove_container(info["Id"], force=True)
                except docker.errors.NotFound:
                    continue
                except docker.errors.APIError as exc:
                    logger.warning("could not remove orphaned container %s: %s", info["Id"][:12], exc)
                    continue
                removed.append(info["Id"])
        if removed:
            logger.info("removed %d orphaned sandbox container(s)", len(removed))
        return removed

    # ------------------------------------------------------------------ images

    def build_image(
        self, task: Task, image_map: ImageMap | None = None, log_path: Path | None = None
    ) -> BuildResult:
        """Build the task's image, tagged ``task.image_tag``, unless that tag exists.

        The tag carries the task's content hash, so an existing tag is reused (cached).
        ``FROM`` lines go through ``image_map`` when one is given (the caller passes None
        where the image map is off); the rewritten Dockerfile is built with
        ``environment/`` as the context. With ``[environment].docker_image`` set, that
        image (mapped too) is pulled if absent and tagged ``task.image_tag`` instead.
        Threads building the same tag wait for one another.

        Args:
            task: the loaded task.
            image_map: public ``FROM`` image -> local image, or None.
            log_path: file for the full build log (parents created), or None.

        Returns:
            the build result.

        Raises:
            BuildTimeout: the build ran past ``[environment].build_timeout_sec``
                (seconds) and was stopped.
            BuildFailed: the build failed; the message ends with the log's tail.
            InfraError: the engine failed.
        """
        return build_task_image(self.client, self._new_api_client, task, image_map=image_map, log_path=log_path)

    # ------------------------------------------------------------------ sandboxes

    def start(self, task: Task, *, run_id: str, trial_id: str, image: str | None = None) -> DockerSandbox:
        """Start a detached container for one trial from the task's built image.

        Resources come from ``[environment]``: ``cpus`` (nano-CPUs), ``memory_mb``
        (memory limit), ``network_mode`` (``no-network`` -> no network at all, ``public``
        -> the default bridge), ``workdir`` and ``env``; the pids limit from settings.
        ``init`` is on so that zombies are reaped; the main process sleeps forever.

        Args:
            task: the task (its image must have been built with :meth:`build_image`).
            run_id / trial_id: written to the container's labels.
            image: start from this image instead of ``task.image_tag``.

        Returns:
            the running sandbox; close it (or use it as a context manager).

        Raises:
            SandboxStartError: the container could not be created or started.
        """
        env = task.config.environment
        if env.network_mode == NetworkMode.PUBLIC:
            network_mode = "bridge"
        elif env.network_mode == NetworkMode.NO_NETWORK:
            network_mode = "none"
        else:
            raise SandboxStartError(f"{task.id}: environment.network_mode {env.network_mode.value!r} is unsupported")
        api = self.client.api
        host_config = api.create_host_config(
            nano_cpus=int(env.cpus * 1e9),
            mem_limit=f"{env.memory_mb}m",
            pids_limit=self.pids_limit,
            init=True,
            network_mode=network_mode,
        )
        safe = "".join(c if c.isalnum() or c in "_.-" else "-" for c in trial_id)[:60]
        try:
            created = api.create_container(
                image or task.image_tag,
                command=["sleep", "infinity"],
                detach=True,
                labels=owner.owner_labels(run_id, trial_id),
                working_dir=env.workdir,
                environment=dict(env.env) or None,
                host_config=host_config,
                name=f"mf-{safe}-{uuid.uuid4().hex[:6]}",
            )
        except docker.errors.APIError as exc:
            raise SandboxStartError(f"creating the container for {task.id} failed: {exc}") from exc
        cid = created["Id"]
        try:
            api.start(cid)
        except docker.errors.APIError as exc:
            try:
                api.remove_container(cid, force=True)
            except docker.errors.APIError:
                pass
            raise SandboxStartError(f"starting the container for {task.id} failed: {exc}") from exc
        return DockerSandbox(api, cid)


class DockerSandbox(Sandbox):
    """One running container (see :class:`mindforge.sandbox.base.Sandbox`).

    Args:
        api: the low-level client it talks through.
        container_id: the running container.
    """

    def __init__(self, api: docker.APIClient, container_id: str) -> None:
        self.api = api
        self.container_id = container_id
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

