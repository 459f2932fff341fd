"""Running a task's instance steps in its sandbox at start, as ``docker build`` would have.

A task whose Dockerfile carries the instance-steps marker (:mod:`mindforge.tasks.dockerfile`)
starts from its family's shared image; :class:`InstanceBoot` then makes the instance:

* ``COPY src... dest`` writes each source's bytes (and permission bits) from
  ``environment/`` into the sandbox, owned by root as ``COPY`` makes them. A relative
  ``dest`` resolves against the image's ``WORKDIR``; a ``dest`` ending in ``/``, an existing
  directory, or the target of several sources is a directory the files go into; a source
  directory's contents are copied, as ``COPY`` does.
* ``RUN`` runs ``/bin/sh -c CMD`` (or the JSON-array form's program) as the image's user
  (root unless the head sets ``USER``) in the image's ``WORKDIR``, stdin empty, with the
  environment ``docker build`` gives it: the image's ``ENV`` (with Docker's default
  ``PATH`` when the image sets none), ``HOME`` and ``HOSTNAME``, nothing else (not the
  task's ``[environment].env``, which only the agent's commands get).

Where they run, for speed (on this engine an ``exec`` costs about 50 ms and a copy through
the archive API about 40-60 ms, the engine re-running itself to unpack it): the ``COPY``
steps before the first ``RUN`` travel as one tar on the stdin of the container's first
process, which unpacks them with ``tar`` and then runs the ``RUN`` steps that follow
(:attr:`InstanceBoot.command`); it prints a line with a random token and its status, then
becomes ``sleep infinity``, every sandbox's main process. The start waits for that line on
the attached output. Nothing of the instance's files stays in the container's
configuration (``/proc/1/cmdline`` shows the commands only; a generator may hold the truth
the verifier checks). When the image has no ``tar`` or does not run as root (the copies
must be root's), the copies go in by the archive API before the start. Steps after a later
``COPY`` run one by one (:func:`run_steps`: archive API, ``exec``). A bundled family
(``COPY gen.py``, ``RUN python3 gen.py``) takes the first path only.

All steps together have the task's ``[environment].build_timeout_sec``. A step that fails
raises :class:`InstanceStepFailed`, a :class:`~mindforge.sandbox.build.BuildFailed`: to the
trial it is ``env_build_failed``, a defect of the task, with the step's output in the detail.
"""

from __future__ import annotations

import posixpath
import re
import shlex
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TextIO

import docker.errors

from mindforge.errors import InfraError
from mindforge.sandbox import archive
from mindforge.sandbox.base import ExecResult, Sandbox
from mindforge.sandbox.build import BuildFailed, BuildTimeout
from mindforge.sandbox.container import DockerSandbox
from mindforge.tasks.dockerfile import InstanceStep
from mindforge.tasks.model import Task

#: Docker's PATH for a container whose image sets none
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: characters of a failed step's output quoted in the error (the end is kept: the error is there)
OUTPUT_TAIL_CHARS = 1500
#: bytes of the boot steps' output kept (the tail)
BOOT_OUTPUT_BYTES = 64 * 1024


class InstanceStepFailed(BuildFailed):
    """An instance step failed when the sandbox started: the task's environment did not build.

    Attributes:
        step: the step that failed (None when the sandbox died before any step said so).
        log_tail: the end of its output (stdout and stderr as they came).
    """

    def __init__(self, message: str, step: InstanceStep | None, log_tail: str = "") -> None:
        self.step = step
        super().__init__(message, log_tail)


class InstanceStepTimeout(InstanceStepFailed, BuildTimeout):
    """The instance steps ran past ``[environment].build_timeout_sec`` and were stopped."""


@dataclass(frozen=True)
class ImageConfig:
    """What the steps take from the shared image's config.

    Attributes:
        workdir: its ``WORKDIR`` (``/`` when unset).
        env: its ``ENV`` as ``KEY=value`` items, in order.
        user: its ``USER`` (``""`` = root).
        tar: the image has ``tar`` (:func:`probe_tar`), so the leading copies can travel
            on the first process's stdin.
    """

    workdir: str
    env: tuple[str, ...]
    user: str
    tar: bool = False

    @property
    def root(self) -> bool:
        """True when the image runs as root (no ``USER``, or ``USER root``/``0``)."""
        return self.user.partition(":")[0] in ("", "root", "0")

    @classmethod
    def from_inspect(cls, info: dict[str, Any], *, tar: bool = False) -> ImageConfig:
        """From ``docker image inspect``'s answer (its ``Config``) and whether the image has ``tar``."""
        config = info.get("Config") or {}
        return cls(workdir=config.get("WorkingDir") or "/", env=tuple(config.get("Env") or ()),
                   user=config.get("User") or "", tar=tar)


def probe_tar(sandbox: DockerSandbox) -> bool:
    """True when a created (not started) container of the image has ``tar`` (``/usr/bin`` or ``/bin``).

    Raises:
        InfraError: the engine failed.
    """
    return any(sandbox.stat(path) is not None for path in ("/usr/bin/tar", "/bin/tar"))


def run_argv(step: InstanceStep, image: ImageConfig) -> str:
    """A ``RUN`` step as a shell command line with ``docker build``'s environment (module docstring)."""
    env = list(image.env)
    if not any(item.startswith("PATH=") for item in env):
        env.insert(0, f"PATH={DEFAULT_PATH}")
    program = list(step.argv) if step.argv else ["/bin/sh", "-c", step.command]
    # HOME and HOSTNAME as Docker set them for this process; the image's ENV after them wins
    return 'env -i "HOME=$HOME" "HOSTNAME=$HOSTNAME" ' + shlex.join([*env, *program]) + " </dev/null"


class InstanceBoot:
    """The instance steps of one sandbox start (see the module docstring for the three parts).

    Use: create the container with :attr:`command` (stdin open and ``StdinOnce`` when
    :attr:`piped`), call :meth:`before_start`, start it, call :meth:`after_start`;
    remove the container if any of them raises.

    Args:
        task: the task (its steps and ``environment/``).
        image: the shared image's config.
        log: where each step and its output are written (a file, or a scratch one).
    """

    def __init__(self, task: Task, image: ImageConfig, log: TextIO) -> None:
        self.task, self.image, self.log = task, image, log
        steps = list(task.instance_steps)
        n_copy = next((i for i, s in enumerate(steps) if s.kind != "copy"), len(steps))
        n_run = next((i for i, s in enumerate(steps[n_copy:]) if s.kind != "run"), len(steps) - n_copy)
        self.copies, self.runs, self.rest = steps[:n_copy], steps[n_copy:n_copy + n_run], steps[n_copy + n_run:]
        #: the leading copies travel as a tar on the first process's stdin (else by the archive API)
        self.piped = bool(self.copies) and image.tar and image.root
        self.token = uuid.uuid4().hex
        self.limit = task.config.environment.build_timeout_sec
        self.seconds = 0.0
        self._socket: socket.socket | None = None
        self._tar = b""

    @property
    def boots(self) -> bool:
        """True when the container's first process runs steps (else it only sleeps)."""
        return self.piped or bool(self.runs)

    @property
    def command(self) -> list[str]:
        """The container's main process: the boot steps, the status line, then ``sleep infinity``."""
        if not self.boots:
            return ["sleep", "infinity"]
        lines = ["exec 2>&1"]
        if self.piped:
            lines.append(f"tar -x -f - -C / || {self._fail('copy')}")
        lines += ["exec </dev/null", f"cd {shlex.quote(self.image.workdir)} || {self._fail('cd')}"]
        lines += [f"{run_argv(step, self.image)} || {self._fail(str(i))}" for i, step in enumerate(self.runs)]
        lines += [f"printf '\\n{self.token} ok\\n'", "exec sleep infinity"]
        return ["/bin/sh", "-c", "\n".join(lines)]

    def _fail(self, what: str) -> str:
        return f"{{ printf '\\n{self.token} fail {what} %s\\n' $?; exit 0; }}"

    def before_start(self, sandbox: DockerSandbox) -> None:
        """Make the leading copies ready (a tar, or put in now) and attach (the container is created, not started).

        Raises:
            InfraError: the engine failed.
        """
        start = time.monotonic()
        for step in self.copies:
            self._note(step)
        if self.piped:
            self._tar = archive.copies_archive(copy_targets(sandbox, self.task.environment_dir, self.copies,
                                                            self.image.workdir))
        else:
            for step in self.copies:
                copy_step(sandbox, self.task.environment_dir, step, self.image.workdir)
        if self.boots:
            params = {"stdin": int(self.piped), "stdout": 1, "stderr": 1, "stream": 1}
            try:
                attached = sandbox.api.attach_socket(sandbox.container_id, params=params)
            except docker.errors.APIError as exc:
                raise InfraError(f"attaching to sandbox {sandbox.container_id[:12]} failed: {exc}") from exc
            # docker-py hands back the response's socket.SocketIO on a unix socket; its _sock is the socket
            self._socket = getattr(attached, "_sock", attached)
        self.seconds = time.monotonic() - start

    def after_start(self, sandbox: DockerSandbox) -> float:
        """Feed the copies in, wait for the boot steps' status, then run the rest by ``exec``.

        Returns:
            Seconds all the steps took (what was done before the start included).

        Raises:
            InstanceStepFailed: a step failed; :class:`InstanceStepTimeout` past the limit.
            InfraError: the engine failed.
        """
        clock = time.monotonic()
        deadline = clock + self.limit - self.seconds
        for step in self.runs:
            self._note(step)
        if self._socket is not None:
            try:
                self._judge(*self._boot(self._socket, deadline))
            finally:
                self._socket.close()
        run_steps(sandbox, self.task, self.rest, self.image, self.log, deadline - time.monotonic())
        self.seconds += time.monotonic() - clock
        return self.seconds

    def _note(self, step: InstanceStep) -> None:
        self.log.write(f"step {self.task.dockerfile} line {step.line} ({step.text})\n")

    def _boot(self, sock: socket.socket, deadline: float) -> tuple[re.Match[str] | None, str, bool]:
        """Send the tar, then read the first process's output until its status line, EOF or the deadline.

        Returns:
            (the status line's match or None, the output, whether the deadline passed).
        """
        out, pending = bytearray(), b""
        status = re.compile(rf"\n{self.token} (ok|fail (\w+) (\d+))\n")
        try:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            if self.piped:
                sock.sendall(self._tar)
                sock.shutdown(socket.SHUT_WR)  # EOF on the process's stdin
            while True:
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                chunk = sock.recv(65536)
                if not chunk:
                    return None, out.decode("utf-8", "replace"), False
                pending += chunk
                while len(pending) >= 8 and len(pending) >= 8 + int.from_bytes(pending[4:8], "big"):
                    size = int.from_bytes(pending[4:8], "big")  # Docker's stream frame: 8-byte header, payload
                    out += pending[8:8 + size]
                    pending = pending[8 + size:]
                del out[:-BOOT_OUTPUT_BYTES]
                text = out.decode("utf-8", "replace")
                if found := status.search(text):
                    return found, text, False
        except TimeoutError:
            return None, out.decode("utf-8", "replace"), True
        except OSError as exc:
            raise InfraError(f"talking to the sandbox's first process failed: {exc}") from exc

    def _judge(self, status: re.Match[str] | None, output: str, expired: bool) -> None:
        text = output.split(f"\n{self.token} ")[0]
        self.log.write(text + ("\n" if text and not text.endswith("\n") else ""))
        tail = text[-OUTPUT_TAIL_CHARS:]
        if status is not None and status[1] == "ok":
            self.log.write("ok\n")
            return
        first = (self.copies if self.piped else self.runs)[0]
        if status is not None:
            step = self.runs[int(status[2])] if status[2].isdigit() else first
            self.log.write(f"exit {status[3]}\n")
            raise InstanceStepFailed(f"instance step failed (exit {status[3]}): {self._where(step)}", step, tail)
        if expired:
            raise InstanceStepTimeout(
                f"instance steps ran past build_timeout_sec = {self.limit:g} s from {self._where(first)}", None, tail
            )
        raise InstanceStepFailed(f"the sandbox stopped during the instance steps from {self._where(first)}", None,
                                 tail)

    def _where(self, step: InstanceStep) -> str:
        return f"{self.task.dockerfile} line {step.line} ({step.text})"


def copy_targets(sandbox: Sandbox, context: Path, steps: list[InstanceStep], workdir: str) -> list[tuple[Path, str]]:
    """Where each source of ``COPY`` steps lands, as ``(local path, sandbox path)``, for one archive.

    A destination is a directory when it ends in ``/``, takes several sources, is one
    in the sandbox, or an earlier step of ``steps`` made it one.

    Raises:
        InfraError: the engine failed.
    """
    out: list[tuple[Path, str]] = []
    made: set[str] = set()
    for step in steps:
        dest = posixpath.normpath(posixpath.join(workdir, step.dest))
        into = step.dest.endswith("/") or len(step.sources) > 1 or dest in made or sandbox.is_dir(dest)
        for src in step.sources:
            local = context / src
            target = dest if local.is_dir() or not into else posixpath.join(dest, local.name)
            out.append((local, target))
            made.update(_parents(target) | ({target} if local.is_dir() else set()))
        if into:
            made.add(dest)
    return out


def _parents(path: str) -> set[str]:
    parts = PurePosixPath(path).parents
    return {str(p) for p in parts if str(p) != "/"}


def run_steps(
    sandbox: Sandbox, task: Task, steps: list[InstanceStep], image: ImageConfig, log: TextIO, timeout_sec: float
) -> None:
    """Run ``steps`` one by one in a running sandbox (``COPY`` by archive, ``RUN`` by ``exec``).

    Args:
        sandbox: the running sandbox.
        task: the task (``environment/`` and the Dockerfile's path).
        steps: the steps, in order.
        image: the shared image's config.
        log: where each step and its output go.
        timeout_sec: the time left for all of them, seconds.

    Raises:
        InstanceStepTimeout: past ``timeout_sec``.
        InstanceStepFailed: a ``RUN`` exited non-zero; the message names the step's line.
        InfraError: the engine failed.
    """
    deadline = time.monotonic() + timeout_sec
    for step in steps:
        where = f"{task.dockerfile} line {step.line} ({step.text})"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise InstanceStepTimeout(f"instance steps ran past build_timeout_sec at {where}", step)
        log.write(f"step {where}\n")
        if step.kind == "copy":
            copy_step(sandbox, task.environment_dir, step, image.workdir)
            continue
        result = sandbox.exec(run_argv(step, image), timeout_sec=remaining, workdir=image.workdir,
                              user=image.user or "0")
        output = _output(result)
        log.write(f"{output}exit {result.exit_code} after {result.duration_sec:.3f} s\n")
        if result.timed_out:
            raise InstanceStepTimeout(f"instance step ran past build_timeout_sec: {where}", step,
                                      output[-OUTPUT_TAIL_CHARS:])
        if result.exit_code != 0:
            raise InstanceStepFailed(f"instance step failed (exit {result.exit_code}): {where}", step,
                                     output[-OUTPUT_TAIL_CHARS:])


def _output(result: ExecResult) -> str:
    out = result.stdout + ("\n" if result.stdout and not result.stdout.endswith("\n") else "")
    return out + result.stderr + ("\n" if result.stderr and not result.stderr.endswith("\n") else "")


def copy_step(sandbox: Sandbox, context: Path, step: InstanceStep, workdir: str) -> None:
    """Put a ``COPY`` step's sources from ``context`` into ``sandbox`` (see the module docstring).

    Raises:
        InfraError: the engine failed.
    """
    for local, target in copy_targets(sandbox, context, [step], workdir):
        if local.is_dir():
            sandbox.put_dir(local, target)
        else:
            sandbox.put_file(target, local.read_bytes(), mode=local.stat().st_mode & 0o7777)
