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
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from mindforge.listen import RAY_LOOPBACK_ENV, is_loopback
from mindforge.payloads import ORCHESTRATION_QUEUE, SANDBOX_QUEUE
from mindforge.settings import POLICY_API_KEY_ENV, Settings, get_settings
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
from workflows.client import connect
from workflows.discovery import DiscoveryWorkflow
from workflows.expansion import ExpansionWorkflow
from workflows.generation import GenerationWorkflow
from workflows.lineage import LineageWorkflow
from workflows.update import UpdateWorkflow

log = logging.getLogger("mindforge.worker")

WORKFLOWS = [LineageWorkflow, GenerationWorkflow, DiscoveryWorkflow, ExpansionWorkflow, UpdateWorkflow]


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


def init_ray(address: str) -> None:
    """Connect to Ray: ``local`` starts an in-process local cluster, anything else is an address.

    The driver's ``MINDFORGE_*`` environment variables travel to the Ray workers in the
    job's runtime environment, so trials on any node use the same data dir, artifact root
    and settings as this worker; the policy API key does not (Ray logs a job's environment:
    trials get it in their payload, :class:`mindforge.payloads.ray_tasks.SandboxSettings`).
    Ray's token authentication is used when this machine has a Ray token
    (``~/.ray/auth_token``) and ``RAY_AUTH_MODE`` is not set otherwise. A local cluster,
    and a driver of a head on loopback, keep Ray's node address on loopback
    (:data:`mindforge.listen.RAY_LOOPBACK_ENV`), as Ray reads it on import.
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
    env = {k: v for k, v in os.environ.items() if k.startswith("MINDFORGE_") and k != POLICY_API_KEY_ENV}
    runtime_env = {"env_vars": env} if env else None
    if address == "local":
        ray.init(address="local", include_dashboard=False, log_to_driver=False, runtime_env=runtime_env)
    else:
        ray.init(address=address, log_to_driver=False, runtime_env=runtime_env)


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
    n = max(1, int(ray.cluster_resources().get("CPU", 1) / settings.trial_cpus))
    ray.get([warm.options(num_cpus=settings.trial_cpus).remote(sandbox) for _ in range(n)])
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
    client = await connect(settings.temporal_address, settings.temporal_namespace)
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
