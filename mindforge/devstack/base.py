"""The dev stack's building blocks: a component's interface, its status row, the shared helpers."""

from __future__ import annotations

import os
import subprocess
import tomllib
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tomli_w
from pydantic import BaseModel

from mindforge.errors import MindForgeError
from mindforge.settings import REPO_ROOT, Settings

#: the socket a locally started dockerd listens on
DEFAULT_DOCKER_SOCKET = "unix:///var/run/docker.sock"
#: probed to learn whether a registry answers (any registry reply counts)
REGISTRY_PROBE_URL = "https://registry-1.docker.io/v2/"

Say = Callable[[str], None]


class DevStackError(MindForgeError):
    """A dev-stack component could not be brought up (the message says what to do)."""


class ComponentStatus(BaseModel):
    """One row of ``mindforge dev status``.

    Attributes:
        name: the component.
        address: where it is (socket, URL, image tag).
        up: whether it answers (for ``registry``: whether a registry is reachable).
        required: whether the stack is unusable without it.
        detail: one line of explanation.
    """

    name: str
    address: str
    up: bool
    required: bool = True
    detail: str = ""


class Component(ABC):
    """A piece of the dev stack."""

    name: str = "component"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @abstractmethod
    def status(self) -> ComponentStatus:
        """Whether the component answers now (quick, changes nothing)."""

    @abstractmethod
    def up(self, say: Say) -> ComponentStatus:
        """Bring the component up if it is not; idempotent.

        Raises:
            DevStackError: it cannot be brought up.
        """

    def down(self, say: Say) -> ComponentStatus:
        """Stop what :meth:`up` started (default: nothing to stop)."""
        return self.status()


def run_script(script: str, args: list[str], log_path: Path, say: Say, what: str) -> None:
    """Run ``deploy/<script>`` with its output in ``log_path``.

    Raises:
        DevStackError: the script failed (the message quotes the log's tail).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    say(f"{what} (log: {log_path}) ...")
    with log_path.open("ab") as log:
        proc = subprocess.run(["bash", str(REPO_ROOT / "deploy" / script), *args], stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
        raise DevStackError(f"{what} failed (exit {proc.returncode}); log {log_path}:\n" + "\n".join(tail))


def is_root() -> bool:
    """True when this process runs as root (dockerd and apt-get need it)."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


def write_setting(path: Path, key: str, value: Any) -> bool:
    """Set one key of a TOML settings file, keeping the other keys (file created if missing).

    Args:
        path: the settings file (``settings.settings_file``).
        key: a top-level key.
        value: a TOML-serialisable value.

    Returns:
        whether the file changed (False: it already held ``value`` under ``key``).

    Raises:
        DevStackError: the file exists and is not valid TOML.
    """
    data: dict[str, Any] = {}
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise DevStackError(f"{path}: not valid TOML ({exc}); fix or delete it") from exc
    if data.get(key) == value and path.is_file():
        return False
    data[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    return True
