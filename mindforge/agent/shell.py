"""A persistent shell session over a sandbox, as a terminal agent expects.

Each ``bash`` action is one sandbox exec, but the session's working directory and
exported variables carry over: the wrapper restores them from a state directory before
the command and saves them after. Background processes keep running (the sandbox's exec
returns when the command's main process exits), so ``server &`` does not hang the call.
Shell functions and aliases do not carry over.
"""

from __future__ import annotations

import base64
import posixpath
import shlex

from mindforge.sandbox.base import ExecResult, Sandbox

STATE_DIR = "/tmp/.mindforge-shell"


class PersistentShell:
    """One trial's shell session.

    Args:
        sandbox: the trial's sandbox.
        root: initial working directory (the contract's ``workspace.root``).
        user: user to run commands as (None = the image's).
    """

    def __init__(self, sandbox: Sandbox, root: str, user: str | None = None) -> None:
        self.sandbox = sandbox
        self.root = root
        self.user = user
        self._started = False

    def _start(self) -> None:
        q = shlex.quote(self.root)
        self.sandbox.exec(
            f"mkdir -p {STATE_DIR} {q} && echo {q} > {STATE_DIR}/cwd && : > {STATE_DIR}/env",
            timeout_sec=30,
            user=self.user,
        )
        self._started = True

    def run(
        self, command: str, *, timeout_sec: float, max_output_bytes: int, truncation: str = "head_tail"
    ) -> ExecResult:
        """Run ``command`` in the session.

        Args:
            command: bash command line (may span lines).
            timeout_sec: per-command limit, in seconds.
            max_output_bytes: cap per stream, in bytes.
            truncation: which bytes of a longer stream are kept (``head_tail``, ``head``, ``tail``).

        Returns:
            the sandbox's exec result (exit code of ``command`` itself).
        """
        if not self._started:
            self._start()
        b64 = base64.b64encode(command.encode()).decode()
        wrapper = (
            f'cd "$(cat {STATE_DIR}/cwd)" 2>/dev/null || cd {shlex.quote(self.root)}; '
            f"set -a; . {STATE_DIR}/env >/dev/null 2>&1; set +a; "
            f'eval "$(echo {b64} | base64 -d)"; '
            f"__mf_rc=$?; pwd > {STATE_DIR}/cwd; export -p > {STATE_DIR}/env; exit $__mf_rc"
        )
        return self.sandbox.exec(
            wrapper, timeout_sec=timeout_sec, user=self.user, max_output_bytes=max_output_bytes, truncation=truncation
        )

    def resolve(self, path: str) -> str:
        """Absolute path for ``path`` (relative paths are taken from the workspace root)."""
        return path if path.startswith("/") else posixpath.normpath(posixpath.join(self.root, path))
