"""The Docker sandbox: one container per trial, driven through the Docker SDK.

:class:`DockerEngine` builds images (:mod:`mindforge.sandbox.build`) and starts containers;
each running one is a :class:`~mindforge.sandbox.container.DockerSandbox`. Starting is
create + start (then the task's instance steps, :mod:`mindforge.sandbox.instance`).
Containers carry owner labels (:mod:`mindforge.sandbox.owner`) so that a new engine on
the same host removes those a dead process left behind.
"""

from __future__ import annotations

import logging
import threading
import uuid
from pathlib import Path

import docker
import docker.errors
from docker.utils import kwargs_from_env

from mindforge.errors import InfraError
from mindforge.sandbox import owner
from mindforge.sandbox.build import (
    BuildFailed,
    BuildResult,
    BuildTimeout,
    build_task_image,
    open_log,
)
from mindforge.sandbox.container import EXEC_GRACE_SEC, DockerSandbox
from mindforge.sandbox.instance import (
    ImageConfig,
    InstanceBoot,
    InstanceStepFailed,
    InstanceStepTimeout,
    probe_tar,
)
from mindforge.settings import Settings
from mindforge.tasks.image_map import ImageMap
from mindforge.tasks.model import NetworkMode, Task

__all__ = [
    "EXEC_GRACE_SEC",
    "BuildFailed",
    "BuildResult",
    "BuildTimeout",
    "DockerEngine",
    "DockerSandbox",
    "InstanceStepFailed",
    "InstanceStepTimeout",
    "SandboxStartError",
]

logger = logging.getLogger(__name__)



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
        self._image_configs: dict[str, ImageConfig] = {}
        self._image_configs_lock = threading.Lock()
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

    def _managed_containers(self) -> list[dict]:
        """Every MindForge container on the engine, running or not (the low-level API's dicts).

        Raises:
            InfraError: the engine failed.
        """
        try:
            return list(self.client.api.containers(all=True, filters={"label": f"{owner.MANAGED}=true"}))
        except docker.errors.APIError as exc:
            raise InfraError(f"listing containers failed: {exc}") from exc

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
        found = self._managed_containers()
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

    def remove_trial_sandboxes(self, trial_ids: set[str]) -> list[str]:
        """Remove every MindForge container of these trials, whoever owns it.

        For trials known to be over (an infrastructure fault ended them) or about to run
        again: a sandbox the engine stopped when it restarted survives its owner's
        clean-up (the engine was down then) and its owner still lives, so the orphan
        clean-up would keep it.

        Returns:
            ids of the removed containers.

        Raises:
            InfraError: the engine failed.
        """
        found = self._managed_containers()
        removed = []
        for info in found:
            if (info.get("Labels") or {}).get(owner.TRIAL_ID) not in trial_ids:
                continue
            try:
                self.client.api.remove_container(info["Id"], force=True)
            except docker.errors.NotFound:
                continue
            except docker.errors.APIError as exc:
                raise InfraError(f"removing sandbox {info['Id'][:12]} failed: {exc}") from exc
            removed.append(info["Id"])
        return removed

    # ------------------------------------------------------------------ images

    def build_image(
        self, task: Task, image_map: ImageMap | None = None, log_path: Path | None = None
    ) -> BuildResult:
        """Build the task's image, tagged ``task.image_tag``, unless that tag exists.

        The tag carries the task's content hash, so an existing tag is reused (cached).
        A task with instance steps builds its family's shared image instead (the
        Dockerfile's lines above the marker, tagged ``task.shared_image_tag``, cached by
        the env hash): one build for all of a family's instances, whose steps
        :meth:`start` runs.
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

    def start(
        self, task: Task, *, run_id: str, trial_id: str, image: str | None = None, log_path: Path | None = None
    ) -> DockerSandbox:
        """Start a detached container for one trial from the task's built image.

        Resources come from ``[environment]``: ``cpus`` (nano-CPUs), ``memory_mb``
        (memory limit), ``network_mode`` (``no-network`` -> no network at all, ``public``
        -> the default bridge), ``workdir`` and ``env``; the pids limit from settings.
        ``init`` is on so that zombies are reaped; the main process sleeps forever.
        A task with instance steps starts from its family's shared image and runs the
        steps before this returns (:class:`mindforge.sandbox.instance.InstanceBoot`:
        leading copies before the start, the next ``RUN`` steps as the container's first
        process, the rest by ``exec``; their seconds are the sandbox's ``instance_steps_sec``).

        Args:
            task: the task (its image must have been built with :meth:`build_image`).
            run_id / trial_id: written to the container's labels.
            image: start from this image instead of ``task.run_image`` (the instance
                steps, if any, still run on it).
            log_path: file for the instance steps' outputs (parents created), or None.

        Returns:
            the running sandbox; close it (or use it as a context manager).

        Raises:
            SandboxStartError: the container could not be created or started.
            InstanceStepFailed: an instance step failed (the container is removed);
                :class:`InstanceStepTimeout` past ``build_timeout_sec``.
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
        image = image or task.run_image
        with open_log(log_path if task.instance_steps else None) as log:
            boot = InstanceBoot(task, self._image_config(image), log) if task.instance_steps else None
            safe = "".join(c if c.isalnum() or c in "_.-" else "-" for c in trial_id)[:60]
            try:
                created = api.create_container(
                    image,
                    command=boot.command if boot else ["sleep", "infinity"],
                    # piped copies: stdin open, and StdinOnce (docker-py sets it when not detached), so the
                    # stdin's EOF closes the process's stdin instead of ending the attach
                    detach=not (boot and boot.piped),
                    stdin_open=bool(boot and boot.piped),
                    labels=owner.owner_labels(run_id, trial_id),
                    working_dir=env.workdir,
                    environment=dict(env.env) or None,
                    host_config=host_config,
                    name=f"mf-{safe}-{uuid.uuid4().hex[:6]}",
                )
            except docker.errors.APIError as exc:
                raise SandboxStartError(f"creating the container for {task.id} failed: {exc}") from exc
            sandbox = DockerSandbox(api, created["Id"])
            try:
                if boot:
                    boot.before_start(sandbox)
                try:
                    api.start(sandbox.container_id)
                except docker.errors.APIError as exc:
                    raise SandboxStartError(f"starting the container for {task.id} failed: {exc}") from exc
                if boot:
                    sandbox.instance_steps_sec = boot.after_start(sandbox)
            except BaseException:
                sandbox.close()
                raise
        return sandbox

    def _image_config(self, image: str) -> ImageConfig:
        """The config the instance steps need, once per image (tags are content hashes).

        Its ``WORKDIR``, ``ENV`` and ``USER`` come from ``docker image inspect``; whether it
        has ``tar`` from a container created (never started) to look, then removed.

        Raises:
            SandboxStartError: the image cannot be inspected, or the container not created.
        """
        with self._image_configs_lock:
            if image not in self._image_configs:
                api = self.client.api
                try:
                    info = api.inspect_image(image)
                    created = api.create_container(image, command=["true"], labels=owner.owner_labels("probe", image))
                except docker.errors.APIError as exc:
                    raise SandboxStartError(f"looking into image {image} failed: {exc}") from exc
                probe = DockerSandbox(api, created["Id"])
                try:
                    self._image_configs[image] = ImageConfig.from_inspect(info, tar=probe_tar(probe))
                finally:
                    probe.close()
            return self._image_configs[image]
