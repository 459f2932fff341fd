"""Named exceptions shared across the core.

Each failure mode has its own exception so that the activity boundary can map it to a
Temporal ``ApplicationError(type=..., non_retryable=...)`` without string matching.
"""

from __future__ import annotations


class MindForgeError(Exception):
    """Base class of every MindForge error."""


class InputError(MindForgeError):
    """Bad user input: a file, a field and a reason.

    Args:
        path: the file (or directory) the defect is in.
        field: the key path inside it (``"verifier.timeout_sec"``), or ``""`` for the
            file as a whole.
        reason: what is wrong, in words.
    """

    def __init__(self, path: object, field: str, reason: str) -> None:
        self.path = str(path)
        self.field = field
        self.reason = reason
        where = f"{self.path}: {field}" if field else self.path
        super().__init__(f"{where}: {reason}")


class ModelSpecError(InputError):
    """A ``--model`` value that names no loadable model: the spec (or path) and the reason."""

    def __init__(self, spec: object, reason: str) -> None:
        super().__init__(spec, "", reason)


class InfraError(MindForgeError):
    """The sandbox engine or another piece of infrastructure failed; retrying may help."""
