"""Dev-stack components for sandboxes: the Docker engine, the local base image, the registry check.

* ``docker`` - the Docker engine: an engine that answers is used as it is; otherwise
  Debian's ``docker.io`` is installed when ``dockerd`` is missing
  (``deploy/install_docker.sh``) and ``dockerd`` is started as root in the background,
  its pid in ``<data_dir>/run/dockerd.pid`` and its log in ``<data_dir>/logs/dockerd.log``.
  ``down`` stops only a ``dockerd`` that ``up`` started.
* ``base-image`` - the local Debian base image (``deploy/build_base_image.sh``).
* ``registry`` - whether a container registry answers; where none does, the image map is
  turned on (``image_map_enabled = true`` in ``settings.settings_file``), else off.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import subprocess
import time
from pathlib import Path

import docker
import docker.errors
import httpx
from docker.utils import kwargs_from_env

from mindforge.devstack.base import (
    DEFAULT_DOCKER_SOCKET,
    REGISTRY_PROBE_URL,
    Component,
    ComponentStatus,
    DevStackError,
    Say,
    is_root,
    run_script,
    write_setting,
)
from mindforge.sandbox.owner import process_start_time
from mindforge.settings import Settings

# --------------------------------------------------------------------------- docker


class DockerComponent(Component):
    """The Docker engine (``dockerd``).

    Args:
        settings: the settings (``data_dir`` holds the pid file and the log).
        dockerd_argv: the command that starts an engine listening at the address
            ``DOCKER_HOST`` names (a private engine: its own ``--host``, ``--data-root``,
            ``--exec-root`` and ``--pidfile``). Default: plain ``dockerd``, which serves
            the default socket and so is only started when ``DOCKER_HOST`` is unset or
            names that socket.
    """

    name = "docker"
    #: seconds to wait for a started dockerd to answer
    start_timeout_sec = 60.0
    #: seconds to wait for dockerd to exit after SIGTERM
    stop_timeout_sec = 30.0

    def __init__(self, settings: Settings, dockerd_argv: list[str] | None = None) -> None:
        super().__init__(settings)
        self.dockerd_argv = dockerd_argv

    @property
    def address(self) -> str:
        return kwargs_from_env().get("base_url") or DEFAULT_DOCKER_SOCKET

    @property
    def pid_file(self) -> Path:
        return self.settings.data_dir / "run" / "dockerd.pid"

    @property
    def log_file(self) -> Path:
        return self.settings.data_dir / "logs" / "dockerd.log"

    def answers(self) -> str | None:
        """The engine's version when it answers within 3 s, else None."""
        try:
            client = docker.DockerClient(**kwargs_from_env(), version="auto", timeout=3)
        except Exception:  # noqa: BLE001 - any failure means "does not answer"
            return None
        try:
            return str(client.version().get("Version", "?"))
        except Exception:  # noqa: BLE001 - any failure means "does not answer"
            return None
        finally:
            client.close()

    def _own_pid(self) -> int | None:
        """The pid of the dockerd ``up`` started, if that very process still runs."""
        try:
            data = json.loads(self.pid_file.read_text())
            pid, start = int(data["pid"]), str(data["start"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return pid if process_start_time(pid) == start else None

    def status(self) -> ComponentStatus:
        version = self.answers()
        own = self._own_pid()
        how = f"started by mindforge (pid {own})" if own else "external"
        detail = f"Docker {version}, {how}" if version else "no engine answers"
        return ComponentStatus(name=self.name, address=self.address, up=version is not None, detail=detail)

    def up(self, say: Say) -> ComponentStatus:
        if self.answers():
            return self.status()
        if self.dockerd_argv is None and self.address != DEFAULT_DOCKER_SOCKET:
            raise DevStackError(f"DOCKER_HOST={self.address} does not answer; start that engine or unset DOCKER_HOST")
        if not is_root():
            raise DevStackError("no Docker engine answers and starting dockerd needs root: run `sudo mindforge dev up`")
        argv = self.dockerd_argv or ["dockerd"]
        if shutil.which(argv[0]) is None:
            log = self.settings.data_dir / "logs" / "install_docker.log"
            run_script("install_docker.sh", [], log, say, "installing docker.io")
        self._start_dockerd(argv, say)
        return self.status()

    def _start_dockerd(self, argv: list[str], say: Say) -> None:
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        say(f"starting dockerd (log: {self.log_file}) ...")
        with self.log_file.open("ab") as log:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.pid_file.write_text(json.dumps({"pid": proc.pid, "start": process_start_time(proc.pid)}))
        deadline = time.monotonic() + self.start_timeout_sec
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.pid_file.unlink(missing_ok=True)
                raise DevStackError(f"dockerd exited with status {proc.returncode}:\n{self._log_tail()}")
            if self.answers():
                say(f"dockerd answers (pid {proc.pid})")
                return
            time.sleep(0.5)
        raise DevStackError(
            f"dockerd (pid {proc.pid}) did not answer within {self.start_timeout_sec:g} s:\n{self._log_tail()}"
        )

    def _log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_file.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def down(self, say: Say) -> ComponentStatus:
        pid = self._own_pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            say("docker: no dockerd started by mindforge; any other engine is left alone")
            return self.status()
        say(f"stopping dockerd (pid {pid}) ...")
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout_sec
        while time.monotonic() < deadline and self._own_pid() == pid:
            time.sleep(0.5)
        if self._own_pid() == pid:
            raise DevStackError(f"dockerd (pid {pid}) still runs {self.stop_timeout_sec:g} s after SIGTERM")
        self.pid_file.unlink(missing_ok=True)
        return self.status()


# --------------------------------------------------------------------------- base image


class BaseImageComponent(Component):
    """The local Debian base image that the image map points public bases at."""

    name = "base-image"

    def _present(self) -> bool | None:
        try:
            client = docker.DockerClient(**kwargs_from_env(), version="auto", timeout=5)
        except Exception:  # noqa: BLE001 - no engine: unknown
            return None
        try:
            client.api.inspect_image(self.settings.base_image)
            return True
        except docker.errors.ImageNotFound:
            return False
        except Exception:  # noqa: BLE001 - no answer: unknown
            return None
        finally:
            client.close()

    def status(self) -> ComponentStatus:
        present = self._present()
        detail = {True: "present", False: "missing (mindforge dev up builds it)", None: "unknown: no engine"}[present]
        return ComponentStatus(name=self.name, address=self.settings.base_image, up=bool(present), detail=detail)

    def up(self, say: Say) -> ComponentStatus:
        present = self._present()
        if present is None:
            raise DevStackError("cannot check the base image: no Docker engine answers")
        if not present:
            if shutil.which("debootstrap") is None:
                if not is_root():
                    raise DevStackError(
                        "building the base image needs debootstrap: run `sudo deploy/install_docker.sh`"
                    )
                log = self.settings.data_dir / "logs" / "install_docker.log"
                run_script("install_docker.sh", [], log, say, "installing debootstrap")
            run_script(
                "build_base_image.sh",
                [self.settings.base_image],
                self.settings.data_dir / "logs" / "base_image.log",
                say,
                f"building {self.settings.base_image} (debootstrap, a few minutes)",
            )
        return self.status()


# --------------------------------------------------------------------------- registry / image map


def registry_answers(url: str = REGISTRY_PROBE_URL, timeout_sec: float = 3.0) -> bool:
    """Whether a container registry answers at ``url``.

    A registry answers ``/v2/`` with 200 or 401 and a ``Docker-Distribution-Api-Version``
    header; a proxy's refusal page (403, 502, ...) does not count.

    Args:
        url: the registry's ``/v2/`` URL.
        timeout_sec: connect and read limit, in seconds.
    """
    try:
        # the system's CA store, as the Docker daemon uses it (it holds a TLS-intercepting
        # proxy's CA where there is one; certifi's bundle would not)
        resp = httpx.get(url, timeout=timeout_sec, follow_redirects=False, verify=ssl.create_default_context())
    except httpx.HTTPError:
        return False
    return resp.status_code in (200, 401) or "docker-distribution-api-version" in resp.headers


class RegistryComponent(Component):
    """Registry reachability, and the image-map switch that follows from it."""

    name = "registry"

    def _row(self, reachable: bool) -> ComponentStatus:
        image_map = "on" if self.settings.image_map_enabled else "off"
        return ComponentStatus(
            name=self.name,
            address=REGISTRY_PROBE_URL,
            up=reachable,
            required=False,
            detail=f"{'reachable' if reachable else 'unreachable'}; image map {image_map}",
        )

    def status(self) -> ComponentStatus:
        return self._row(registry_answers())

    def up(self, say: Say) -> ComponentStatus:
        reachable = registry_answers()
        changed = write_setting(self.settings.settings_file, "image_map_enabled", not reachable)
        self.settings = self.settings.model_copy(update={"image_map_enabled": not reachable})
        if not changed:
            pass  # said when the settings file last changed; the status row still shows it
        elif reachable:
            say(f"registry reachable: task images are pulled as named (image map off, {self.settings.settings_file})")
        else:
            say("no container registry answers (expected offline): task images named in deploy/image_map.toml "
                f"are built locally from the base image instead (image map on, {self.settings.settings_file})")
        return self._row(reachable)


