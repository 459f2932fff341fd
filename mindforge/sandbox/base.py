"""The abstract sandbox: a running, isolated environment a trial's agent and verifier act in.

Modelled on Harbor's small environment interface (``src/harbor/environments/base.py``):
exec a command, put files in, get files out, close. Everything is synchronous; fan-out
happens one level up (threads for ``tasks validate``, Ray for lineages).
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from pathlib import Path

from pydantic import BaseModel

#: default cap on captured bytes per stream (head + tail kept)
DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024


class ExecResult(BaseModel):
    """Result of one command run in a sandbox.

    Attributes:
        exit_code: the command's real exit status; None when it was killed by the
            timeout.
        stdout / stderr: decoded as UTF-8 with replacement characters for invalid
            bytes, capped: when a stream exceeded the cap, its head and tail are kept
            and a marker line in between states how many bytes were omitted.
        stdout_bytes / stderr_bytes: total bytes the command wrote to each stream.
        stdout_omitted_bytes / stderr_omitted_bytes: bytes dropped by the cap.
        timed_out: True when the per-command timeout fired.
        duration_sec: wall time of the command, in seconds.
    """

    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    stdout_omitted_bytes: int = 0
    stderr_omitted_bytes: int = 0
    timed_out: bool = False
    duration_sec: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the command exited 0 within its timeout."""
        return self.exit_code == 0 and not self.timed_out


class PidsUsage(BaseModel):
    """A sandbox's processes against its pids limit (the Linux pids cgroup).

    Attributes:
        current: processes (threads count too) in the sandbox now.
        limit: the most it may hold at once; None when unlimited.
        refused_forks: forks the limit refused since the sandbox started (the ``max``
            count of the cgroup's ``pids.events``); None when it could not be read.
    """

    current: int
    limit: int | None = None
    refused_forks: int | None = None

    @property
    def fired(self) -> bool:
        """True when the limit refused a fork, or the sandbox holds as many processes as it may."""
        return bool(self.refused_forks) or (self.limit is not None and self.current >= self.limit)

    def describe(self) -> str:
        """One line of evidence, e.g. ``58 of 64 processes, 3 forks refused``."""
        refused = "refused forks unknown" if self.refused_forks is None else f"{self.refused_forks} forks refused"
        return f"{self.current} of {self.limit if self.limit is not None else 'unlimited'} processes, {refused}"


class Sandbox(ABC):
    """A started environment for one trial. Use as a context manager; ``close`` always removes it."""

    @abstractmethod
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
        """Run ``command`` with ``bash -c`` in the sandbox.

        Returns promptly when the command's main process exits, even if it left
        background processes holding its output open.

        Args:
            command: a bash command line.
            timeout_sec: per-command wall-clock limit, in seconds; on expiry the command's
                process group is killed and ``timed_out`` is set.
            workdir: working directory inside the sandbox (default: the image's).
            env: extra environment variables.
            user: user to run as (default: the image's).
            max_output_bytes: cap per stream, in bytes.
            truncation: which bytes of a longer stream are kept: ``head_tail`` (the
                first and last halves), ``head`` or ``tail``
                (:func:`mindforge.sandbox.output.split_budget`).

        Raises:
            InfraError: the engine failed (not the command).
        """

    @abstractmethod
    def put_dir(self, local_dir: Path, sandbox_dir: str) -> None:
        """Copy the contents of ``local_dir`` into ``sandbox_dir`` (created if missing).

        Raises:
            InfraError: the engine failed.
        """

    @abstractmethod
    def put_file(self, sandbox_path: str, data: bytes, mode: int = 0o644) -> None:
        """Write ``data`` to ``sandbox_path`` (parents created).

        Raises:
            InfraError: the engine failed.
        """

    @abstractmethod
    def get_file(self, sandbox_path: str, max_bytes: int = 10 * 1024 * 1024) -> bytes | None:
        """Read a file from the sandbox; None when it does not exist.

        Raises:
            InfraError: the engine failed, or the file is larger than ``max_bytes``.
        """

    def is_dir(self, sandbox_path: str) -> bool:
        """True when ``sandbox_path`` is a directory in the sandbox (one ``test -d``; engines may do better).

        Raises:
            InfraError: the engine failed.
        """
        return self.exec(f"test -d {shlex.quote(sandbox_path)}", timeout_sec=30.0).exit_code == 0

    @abstractmethod
    def pids_usage(self) -> PidsUsage | None:
        """The sandbox's process count against its pids limit, or None when the engine does not report it.

        Must work when no process can be started in the sandbox any more.

        Raises:
            InfraError: the engine failed.
        """

    @abstractmethod
    def close(self) -> float:
        """Remove the sandbox (never waiting out a stop timeout). Idempotent.

        Returns:
            seconds spent tearing down.
        """

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
