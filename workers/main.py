"""The MindForge worker: Temporal workers for the orchestration and sandbox task queues.

One process runs both (``mindforge worker``); at scale, run ``--queue orchestration`` and
``--queue sandbox`` workers separately, each pointed at the Temporal cluster and the Ray
cluster by settings. SIGTERM / SIGINT shut down gracefully: no new tasks are polled,
in-flight activities get ``graceful_shutdown_sec`` to finish, then are cancelled (which
cancels their Ray tasks; the runner removes their containers).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    Worker,
)

from mindforge.listen import RAY_LOOPBACK_ENV, is_loopback
from mindforge.payloads import ORCHESTRATION_QUEUE, SANDBOX_QUEUE
from mindforge.settings import Settings, get_settings
from workers.curriculum_activities import CurriculumActivities
from workers.discovery_activities import DiscoveryActivities
from workers.evaluation_activities import EvaluationActivities
from workers.experience_activities import ExperienceActivities
from workers.iteration_activities import IterationActivities
from workers.lineage_activities import LineageActivities
from workers.search_activities import SearchActivities
from workers.successor_activities import SuccessorActivities
from workers.training_activities import TrainingActivities
from workers.trial_activities import TrialActivities
from workers.update_activities import UpdateActivities
from workflows.client import connect_settings
from workflows.discovery import DiscoveryWorkflow
from workflows.expansion import ExpansionWorkflow
from workflows.generation import GenerationWorkflow
from workflows.lineage import LineageWorkflow
from workflows.update import UpdateWorkflow

log = logging.getLogger("mindforge.worker")

WORKFLOWS = [LineageWorkflow, GenerationWorkflow, DiscoveryWorkflow, ExpansionWorkflow, UpdateWorkflow]

#: the worker's environment variables a Ray task may see (its job's runtime environment), and
#: only these: Ray writes a job's runtime environment to its logs (the Ray Client server's, the
#: runtime-env agent's), so the store's URL, the Temporal and policy API keys, and the TLS and
#: secret files never go there. A trial gets what it needs in its payload
#: (:class:`mindforge.payloads.ray_tasks.SandboxSettings`, the policy key included); these are
#: what code in a Ray task still reads from its settings (the policy URL a contract leaves
#: open, the data dir's model cache, the artifact root, the image map, the trial's resources).
RAY_TASK_ENV = (
    "MINDFORGE_DATA_DIR", "MINDFORGE_ARTIFACT_ROOT", "MINDFORGE_BASE_IMAGE", "MINDFORGE_IMAGE_MAP_FILE",
    "MINDFORGE_IMAGE_MAP_ENABLED", "MINDFORGE_DOCKER_PIDS_LIMIT", "MINDFORGE_POLICY_URL", "MINDFORGE_TRIAL_CPUS",
    "MINDFORGE_TRIAL_SANDBOXES",
)
#: how often ``init_ray`` tries a Ray Client address before it gives up (a head's client
#: server can refuse the first session while it starts)
RAY_CLIENT_TRIES = 3


def use_ray_token_if_present() -> None:
    """Send this machine's Ray token (``~/.ray/auth_token``) when ``RAY_AUTH_MODE`` is unset.

    ``ray start`` turns token authentication on by itself when that file exists, and a
    head started so accepts only drivers that send the token; a driver joining an existing
    cluster loads it only with ``RAY_AUTH_MODE=token``, which Ray reads when it is first
    imported. :func:`init_ray` calls this before it imports Ray; in a process that has
    imported Ray already, set ``RAY_AUTH_MODE`` in its environment instead.
    """
    if "RAY_AUTH_MODE" not in os.environ and (Path.home() / ".ray" / "auth_token").is_file():
        os.environ["RAY_AUTH_MODE"] = "token"


def ray_task_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The variables of :data:`RAY_TASK_ENV` that ``environ`` (default this process's) sets."""
    environ = dict(os.environ) if environ is None else environ
    return {k: environ[k] for k in RAY_TASK_ENV if k in environ}


#: the address :func:`init_ray` last connected to, which :func:`ensure_ray` reconnects to
_RAY_ADDRESS: list[str] = []
_RAY_LOCK = threading.Lock()


def init_ray(address: str) -> None:
    """Connect to Ray: ``local`` starts an in-process local cluster, anything else is an address.

    The driver's variables of :data:`RAY_TASK_ENV` travel to the Ray workers in the job's
    runtime environment, so trials on any node use the same data dir, artifact root and
    settings as this worker, and nothing else of its environment does (Ray logs a job's
    runtime environment: the store's URL and every key stay out; trials get the policy key
    in their payload, :class:`mindforge.payloads.ray_tasks.SandboxSettings`). A Ray Client
    address (``ray://host:10001``) is tried :data:`RAY_CLIENT_TRIES` times.
    Ray's token authentication is used when this machine has a Ray token
    (``~/.ray/auth_token``) and ``RAY_AUTH_MODE`` is not set otherwise. A local cluster,
    and a driver of a head on loopback, keep Ray's node address on loopback
    (:data:`mindforge.listen.RAY_LOOPBACK_ENV`), as Ray reads it on import.

    Raises:
        ConnectionError: the Ray Client server refused every try.
    """
    import sys

    if "ray" not in sys.modules:
        if address != "local":
            use_ray_token_if_present()
        if address == "local" or is_loopback(address.removeprefix("ray://").rpartition(":")[0] or address):
            for name, value in RAY_LOOPBACK_ENV.items():
                os.environ.setdefault(name, value)
    import ray

    if ray.is_initialized():
        return
    env = ray_task_env()
    runtime_env = {"env_vars": env} if env else None
    if address == "local":
        ray.init(address="local", include_dashboard=False, log_to_driver=False, runtime_env=runtime_env)
    elif address.startswith("ray://"):
        for attempt in range(1, RAY_CLIENT_TRIES + 1):
            try:
                ray.init(address=address, log_to_driver=False, runtime_env=runtime_env)
                break
            except ConnectionError:
                if attempt == RAY_CLIENT_TRIES:
                    raise
                time.sleep(2.0 * attempt)
    else:
        ray.init(address=address, log_to_driver=False, runtime_env=runtime_env)
    _RAY_ADDRESS[:] = [address]


def connected_ray_address() -> str | None:
    """The address :func:`init_ray` connected this process to, while Ray is initialized; else None."""
    import ray

    return _RAY_ADDRESS[0] if _RAY_ADDRESS and ray.is_initialized() else None


def disconnect_ray() -> None:
    """End this process's Ray connection on purpose: ``ray.shutdown()``, and :func:`ensure_ray` connects no more."""
    import ray

    with _RAY_LOCK:
        _RAY_ADDRESS.clear()
        ray.shutdown()


def ray_session_lost() -> bool:
    """Whether this process's Ray Client session (made by :func:`init_ray`) is gone; no I/O.

    A Ray Client driver loses its session when the head goes away (its Ray Client server
    is on the head). Ray's data channel gives up after its reconnect grace period
    (``RAY_CLIENT_RECONNECT_GRACE_PERIOD``) or at once on an unrecoverable error, yet
    ``ray.is_initialized()`` may say True until a later call fails; the data channel's own
    shut-down flag says it first (Ray Client internals, read defensively: absent, only
    ``is_initialized`` counts). False for a session ended by :func:`disconnect_ray`, and for
    a driver that is not a Ray Client (a local cluster, a head reached directly).
    """
    import ray

    if not _RAY_ADDRESS or not _RAY_ADDRESS[0].startswith("ray://"):
        return False
    if not ray.is_initialized():
        return True
    from ray.util.client import ray as client_api

    worker = getattr(client_api.get_context(), "client_worker", None)
    data = getattr(worker, "data_client", None)
    return bool(worker is not None and (not worker.is_connected() or getattr(data, "_in_shutdown", False)))


def ensure_ray() -> None:
    """Connect again to the Ray Client address :func:`init_ray` last connected to, when the session was lost.

    The head back (GCS fault tolerance keeps the cluster and its workers), the next sandbox
    activity connects anew (:class:`RayReconnect`). Nothing happens unless
    :func:`ray_session_lost`.

    Raises:
        ApplicationError: retryable (``RayUnavailableError``): Ray does not answer yet.
    """
    import ray

    with _RAY_LOCK:
        if not ray_session_lost():
            return
        address = _RAY_ADDRESS[0]
        log.warning("Ray Client session with %s lost; connecting again", address)
        try:
            ray.shutdown()
            _wait_for_client_server(address, RECONNECT_WAIT_SEC)
            init_ray(address)
        except Exception as exc:  # noqa: BLE001 - any failure to connect is the same retryable outage
            raise ApplicationError(f"Ray at {address} does not answer: {exc}", type="RayUnavailableError") from exc


#: how long a reconnect waits for the head's Ray Client server to listen before it tries Ray at all
RECONNECT_WAIT_SEC = 120.0


def _wait_for_client_server(address: str, timeout_sec: float) -> None:
    """Wait until the Ray Client server of ``ray://host:port`` accepts TCP connections.

    Ray Client's own connect, tried at a head that is still starting, spends tens of
    seconds in its retries even once the head is back; a TCP probe every half second
    does not.

    Raises:
        ConnectionError: nothing listens within ``timeout_sec``.
    """
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    deadline = time.monotonic() + timeout_sec
    while True:
        try:
            with socket.create_connection((host.strip("[]"), int(port or 10001)), timeout=1.0):
                return
        except OSError as exc:
            if time.monotonic() > deadline:
                raise ConnectionError(f"nothing listens at {address} after {timeout_sec:g} s") from exc
            time.sleep(0.5)


#: seconds between the heartbeats an activity sends while :class:`RayReconnect` connects
RECONNECT_HEARTBEAT_SEC = 5.0


class RayReconnect(Interceptor):
    """A Temporal worker interceptor: before a sandbox activity runs, a lost Ray Client session is made anew.

    While it connects (a restarted head takes seconds) the activity heartbeats with the
    details it had, so its heartbeat timeout does not end an attempt that is only waiting
    for Ray.
    """

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        """Wrap the activity inbound chain."""
        return _EnsureRayInbound(next)


class _EnsureRayInbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        if ray_session_lost():
            from temporalio import activity

            connecting = asyncio.ensure_future(asyncio.to_thread(ensure_ray))
            while not connecting.done():
                activity.heartbeat(*activity.info().heartbeat_details)
                await asyncio.wait([connecting], timeout=RECONNECT_HEARTBEAT_SEC)
            connecting.result()
        return await super().execute_activity(input)


def warm_up_ray(settings: Settings | None = None) -> int:
    """Start one Ray worker process per trial the cluster runs at once and load MindForge's trial code in each.

    A cluster of C CPUs runs ``C / trial_cpus`` trials at once (settings' ``trial_cpus``).

    Ray starts worker processes lazily; without this the first trials of a job also pay
    for interpreter start-up, imports and the Docker client (seconds). Returns the number
    of warmed processes.

    Args:
        settings: the worker's settings, whose Docker engine each process opens
            (default :func:`get_settings`).
    """
    import ray

    from mindforge.payloads.ray_tasks import SandboxSettings
    from workers.ray_trials import warm

    settings = settings or get_settings()
    sandbox = SandboxSettings.from_settings(settings)
    found = ray.cluster_resources()
    n = max(1, int(found.get("CPU", 1) / settings.trial_cpus))
    resources = None
    if settings.trial_sandboxes:
        n = max(1, min(n, int(found.get("sandbox", 0) / settings.trial_sandboxes)))
        resources = {"sandbox": settings.trial_sandboxes}
    ray.get([warm.options(num_cpus=settings.trial_cpus, resources=resources).remote(sandbox) for _ in range(n)])
    return n


def queue_activities(acts: LineageActivities, settings: Settings) -> dict[str, list]:
    """The activities each task queue's worker registers, bound to one store and artifact root.

    Args:
        acts: the lineage activities (their store engine is shared by the others).
        settings: where artifacts go (``settings.artifacts``): staging and admitted tasks,
            training samples, adapters, trial directories and experience replays (with the Docker
            settings the Ray tasks get).

    Returns:
        ``{"orchestration": [...], "sandbox": [...]}``.
    """
    disc = DiscoveryActivities(acts.engine, settings.artifacts, settings)
    upd = UpdateActivities(acts.engine, settings.artifacts)
    training = TrainingActivities(acts.engine, settings.artifacts)
    store_acts = acts.all() + [disc.propose, disc.admit]
    store_acts += upd.orchestration_activities() + IterationActivities(acts.engine).all()
    store_acts += SearchActivities(acts.engine).all() + SuccessorActivities(acts.engine).all()
    store_acts += EvaluationActivities(acts.engine).all()
    # growing the experience library replays candidates in Ray tasks: the sandbox queue, like run_trials
    experience = ExperienceActivities(acts.engine, settings).all()
    sandbox_acts = TrialActivities(acts.engine, settings).all() + [disc.check, *training.sandbox_activities()]
    sandbox_acts += experience + CurriculumActivities(settings).all()
    return {"orchestration": store_acts, "sandbox": sandbox_acts}


def build_workers(
    client: Client, acts: LineageActivities, queues: list[str], graceful_shutdown_sec: float, *, settings: Settings
) -> list[Worker]:
    """Worker objects for the requested queues (``orchestration``, ``sandbox``), in that order.

    Args:
        client: the Temporal client.
        acts: the lineage activities, bound to the store.
        queues: subset of ``["orchestration", "sandbox"]``.
        graceful_shutdown_sec: seconds in-flight activities get before cancellation.
        settings: the settings the activities use (artifact root), see :func:`queue_activities`.
    """
    workers = []
    activities = queue_activities(acts, settings)
    if "orchestration" in queues:
        workers.append(
            Worker(
                client,
                task_queue=ORCHESTRATION_QUEUE,
                workflows=WORKFLOWS,
                activities=activities["orchestration"],
                graceful_shutdown_timeout=timedelta(seconds=graceful_shutdown_sec),
            )
        )
    if "sandbox" in queues:
        workers.append(
            Worker(
                client,
                task_queue=SANDBOX_QUEUE,
                activities=activities["sandbox"],
                max_concurrent_activities=8,
                graceful_shutdown_timeout=timedelta(seconds=graceful_shutdown_sec),
                interceptors=[RayReconnect()],
            )
        )
    return workers


async def run_worker(
    settings: Settings | None = None, queues: list[str] | None = None, graceful_shutdown_sec: float = 30.0
) -> None:
    """Run until SIGTERM/SIGINT, then shut down gracefully.

    Args:
        settings: default :func:`get_settings`.
        queues: subset of ``["orchestration", "sandbox"]`` (default both).
        graceful_shutdown_sec: seconds in-flight activities get before cancellation.
    """
    settings = settings or get_settings()
    queues = queues or ["orchestration", "sandbox"]
    client = await connect_settings(settings)
    if "sandbox" in queues:
        init_ray(settings.ray_address)
        warm_up_ray(settings)
    acts = LineageActivities(settings.db_url)
    workers = build_workers(client, acts, queues, graceful_shutdown_sec, settings=settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runs = [asyncio.create_task(w.run()) for w in workers]
    log.info("worker polling %s on %s", queues, settings.temporal_address)
    await stop.wait()
    log.info("shutting down")
    await asyncio.gather(*(w.shutdown() for w in workers))
    await asyncio.gather(*runs, return_exceptions=True)
