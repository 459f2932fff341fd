"""Building a task's image: content-hash cache, image map, build timeout, full build log.

Used through :meth:`mindforge.sandbox.docker.DockerEngine.build_image`. The image is
tagged ``task.image_tag`` (``mindforge-task/<id>:<content hash[:16]>``, labels
``mindforge.task_id`` / ``mindforge.task_hash``), so a tag that exists is a finished build
of exactly these task files and is never rebuilt. A task with instance steps (a family
instance, :mod:`mindforge.tasks.dockerfile`) builds its family's shared image instead: the
Dockerfile's head only, tagged ``task.shared_image_tag``
(``mindforge-family/<family>:<env hash[:16]>``, labels ``mindforge.family`` /
``mindforge.env_hash``), once for all the family's instances.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import docker
import docker.errors
from docker.types.daemon import CancellableStream

from mindforge.errors import InfraError, MindForgeError
from mindforge.tasks.image_map import ImageMap
from mindforge.tasks.model import Task

#: lines of the build log quoted in a BuildFailed message
LOG_TAIL_LINES = 25


class BuildFailed(MindForgeError):
    """The task's environment did not build (a defect of the task, not of the engine).

    Attributes:
        log_tail: the last lines of the build log.
    """

    def __init__(self, message: str, log_tail: str = "") -> None:
        self.log_tail = log_tail
        super().__init__(f"{message}\n{log_tail}".rstrip())


class BuildTimeout(BuildFailed):
    """The build ran past ``[environment].build_timeout_sec`` and was stopped."""


@dataclass
class BuildResult:
    """One finished (or cached) image build.

    Attributes:
        image: the tag containers are started from (``task.run_image``: the family's shared
            image for a task with instance steps, else ``task.image_tag``).
        cached: True when the tag existed and nothing was built.
        duration_sec: wall time spent, in seconds.
        substitutions: ``(public reference, local image)`` pairs the image map applied.
        log_path: the build log, when one was asked for.
    """

    image: str
    cached: bool
    duration_sec: float
    substitutions: list[tuple[str, str]] = field(default_factory=list)
    log_path: Path | None = None


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def tag_lock(tag: str) -> threading.Lock:
    """The in-process lock for one image tag (two threads never build the same tag at once)."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(tag, threading.Lock())


class _Abort:
    """Stops a streaming build at its deadline, from a timer thread.

    ``APIClient.build`` returns a plain generator that blocks in a socket read; the only
    way to stop it (and have the daemon cancel the build, which it does when the client
    goes away) is to shut the connection down from another thread. The response is
    caught with a requests response hook on the build's own client, and closed with
    docker-py's :class:`CancellableStream`, which shuts the socket down.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._response: Any = None
        self.fired = False

    def capture(self, response: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self._response = response
            if self.fired:
                self._close()
        return response

    def fire(self) -> None:
        with self._lock:
            self.fired = True
            self._close()

    def _close(self) -> None:
        if self._response is not None:
            try:
                CancellableStream(iter(()), self._response).close()
            except Exception:  # noqa: BLE001 - best effort: the socket may be gone already
                self._response.close()


def _log_tail(lines: list[str]) -> str:
    return "".join(lines[-LOG_TAIL_LINES:]).rstrip()


def _stream_build(
    make_client: Callable[[], docker.APIClient],
    *,
    timeout_sec: float,
    log: TextIO,
    build_kwargs: dict[str, Any],
) -> None:
    """Run one ``/build`` request, write its log, stop it at the deadline.

    Raises:
        BuildTimeout: past ``timeout_sec``.
        BuildFailed: the daemon reported an error.
        InfraError: the engine could not be reached.
    """
    lines: list[str] = []

    def write(text: str) -> None:
        log.write(text)
        lines.extend(text.splitlines(keepends=True)[-LOG_TAIL_LINES:])
        del lines[:-LOG_TAIL_LINES]

    abort = _Abort()
    api = make_client()
    api.hooks["response"].append(abort.capture)
    timer = threading.Timer(timeout_sec, abort.fire)
    timer.daemon = True
    timer.start()
    error: str | None = None
    try:
        for chunk in api.build(decode=True, **build_kwargs):
            if "stream" in chunk:
                write(chunk["stream"])
            elif "status" in chunk:
                write(f"{chunk.get('id', '')} {chunk['status']}".strip() + "\n")
            if "error" in chunk:
                error = str(chunk["error"]).strip()
                write(f"ERROR: {error}\n")
            if abort.fired:
                break
    except docker.errors.APIError as exc:
        if not abort.fired:
            write(f"ERROR: {exc.explanation or exc}\n")
            raise BuildFailed(f"build rejected by the engine: {exc.explanation or exc}", _log_tail(lines)) from exc
    except Exception as exc:  # noqa: BLE001 - a closed socket surfaces as various errors
        if not abort.fired:
            raise InfraError(f"docker build stream failed: {type(exc).__name__}: {exc}") from exc
    finally:
        timer.cancel()
        api.close()
    if abort.fired:
        write(f"ERROR: build stopped after {timeout_sec:g} s (build_timeout_sec)\n")
        raise BuildTimeout(f"build ran past build_timeout_sec = {timeout_sec:g} s", _log_tail(lines))
    if error is not None:
        raise BuildFailed(f"build failed: {error}", _log_tail(lines))


def build_task_image(
    client: docker.DockerClient,
    make_client: Callable[[], docker.APIClient],
    task: Task,
    *,
    image_map: ImageMap | None,
    log_path: Path | None,
) -> BuildResult:
    """Build (or reuse) ``task.run_image``; see :meth:`DockerEngine.build_image`."""
    tag = task.run_image
    start = time.monotonic()
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
    with tag_lock(tag):
        if _exists(client, tag):
            if log_path is not None:
                why = "family image, by its env hash" if task.instance_steps else "by task content hash"
                log_path.write_text(f"image {tag} present (cached {why})\n", encoding="utf-8")
            return BuildResult(tag, cached=True, duration_sec=time.monotonic() - start, log_path=log_path)
        with open_log(log_path) as log:
            if task.config.environment.docker_image:
                subs = _use_prebuilt(client, task, image_map, log)
            else:
                subs = _build_dockerfile(make_client, task, image_map, log)
        if not _exists(client, tag):
            raise BuildFailed(f"build of {tag} ended without an image")
    return BuildResult(tag, cached=False, duration_sec=time.monotonic() - start, substitutions=subs, log_path=log_path)


def open_log(log_path: Path | None) -> TextIO:
    """``log_path`` opened for writing, or a temporary file when None (kept for a tail only)."""
    if log_path is None:
        return tempfile.TemporaryFile("w+", encoding="utf-8")  # kept for the tail only
    return log_path.open("w", encoding="utf-8")


def _exists(client: docker.DockerClient, ref: str) -> bool:
    try:
        client.api.inspect_image(ref)
        return True
    except docker.errors.ImageNotFound:
        return False
    except docker.errors.APIError as exc:
        raise InfraError(f"docker image inspect {ref} failed: {exc}") from exc


def _build_dockerfile(
    make_client: Callable[[], docker.APIClient], task: Task, image_map: ImageMap | None, log: TextIO
) -> list[tuple[str, str]]:
    env = task.config.environment
    if task.instance_steps:  # the shared image: the Dockerfile's head, one image per family
        text = task.shared_dockerfile
        labels = {"mindforge.family": task.family, "mindforge.env_hash": task.env_hash}
    else:
        text = task.dockerfile.read_text(encoding="utf-8")
        labels = {"mindforge.task_id": task.id, "mindforge.task_hash": task.content_hash}
    subs: list[tuple[str, str]] = []
    if image_map is not None:
        text, subs = image_map.rewrite_dockerfile(text)
    for public, local in subs:
        log.write(f"image map: FROM {public} -> {local}\n")
    with tempfile.TemporaryDirectory(prefix="mindforge-build-") as tmp:
        # A Dockerfile outside the context is read by docker-py and added to the
        # context tar under a private name; environment/Dockerfile stays as written.
        dockerfile = Path(tmp) / "Dockerfile"
        dockerfile.write_text(text, encoding="utf-8")
        _stream_build(
            make_client,
            timeout_sec=env.build_timeout_sec,
            log=log,
            build_kwargs={
                "path": str(task.environment_dir),
                "dockerfile": str(dockerfile),
                "tag": task.run_image,
                "rm": True,
                "forcerm": True,
                "pull": False,
                "labels": labels,
            },
        )
    return subs


def _use_prebuilt(
    client: docker.DockerClient, task: Task, image_map: ImageMap | None, log: TextIO
) -> list[tuple[str, str]]:
    """``[environment].docker_image``: map it, pull it if absent, tag it ``task.image_tag``."""
    ref = str(task.config.environment.docker_image)
    local = image_map.resolve(ref) if image_map is not None else None
    subs = [(ref, local)] if local and local != ref else []
    image = local or ref
    log.write(f"prebuilt image {ref}" + (f" -> {image} (image map)" if subs else "") + "\n")
    if not _exists(client, image):
        log.write(f"pulling {image}\n")
        try:
            client.images.pull(image)
        except docker.errors.APIError as exc:
            raise BuildFailed(
                f"[environment].docker_image {image!r} is not present and cannot be pulled: {exc}"
            ) from exc
    repo, _, tag = task.image_tag.rpartition(":")
    try:
        client.api.tag(image, repo, tag)
    except docker.errors.APIError as exc:
        raise InfraError(f"docker tag {image} {task.image_tag} failed: {exc}") from exc
    return subs
