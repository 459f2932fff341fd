"""Ray side of trial execution: one Ray task per trial.

Each Ray worker process keeps one :class:`DockerEngine` (its start-up reaps containers
whose owning process is gone, which is how a killed worker's containers get removed).
Every task takes and returns a typed model (:mod:`mindforge.payloads.ray_tasks`); the
activity writes the trial record it gets back to the store.
"""

from __future__ import annotations

import os
import socket
from collections import Counter
from typing import Any

import ray

from mindforge.discovery.records import ProposalVerdict
from mindforge.payloads import TrainAdapterResult, ValidateAdapterInput
from mindforge.payloads.ray_tasks import (
    CheckProposalTaskInput,
    InstanceVerdict,
    ReplayEntryTaskInput,
    RunTrialTaskInput,
    RunTrialTaskResult,
    SandboxSettings,
    TrainTaskInput,
    ValidateInstanceTaskInput,
    ValidateTaskResult,
)
from mindforge.trials.replay import ReplayVerdict

#: one Docker engine (and image map) per sandbox settings, per Ray worker process
_ENGINES: dict[SandboxSettings, Any] = {}


def _engine(sandbox: SandboxSettings) -> Any:
    """The Docker engine and image map of ``sandbox``, opened once in this process."""
    if sandbox not in _ENGINES:
        from mindforge.trials.run import open_engine

        _ENGINES[sandbox] = open_engine(sandbox.to_settings())
    return _ENGINES[sandbox]


def run_trial_payload(payload: RunTrialTaskInput) -> RunTrialTaskResult:
    """Run one trial and return its record, ``worker`` set to ``host/node/pid``.

    Args:
        payload: the trial (task, ids, agent kind, contract, endpoint, and the worker's
            sandbox settings: the artifact root and Docker engine it runs with).
    """
    from pathlib import Path

    from mindforge.agent.base import Agent
    from mindforge.agent.simple import NopAgent, OracleAgent
    from mindforge.tasks.loader import load_task
    from mindforge.trials.run import run_trial

    engine, image_map = _engine(payload.sandbox)
    task = load_task(Path(payload.task_path))
    kind = payload.agent
    agent: Agent
    if kind == "model":
        from mindforge.agent.loop import ModelAgent
        from mindforge.hcp import loads_contract

        contract = loads_contract(payload.contract_toml, source=f"contract {payload.contract_hash}")
        agent = ModelAgent(
            contract, base_url=payload.policy_url, seed=payload.seed, policy_key=payload.sandbox.policy_api_key
        )
    elif kind == "oracle":
        agent = OracleAgent()
    else:
        agent = NopAgent()
    rec = run_trial(
        task,
        agent,
        engine,
        run_id=payload.run_id,
        trial_id=payload.trial_id,
        artifact_root=Path(payload.sandbox.artifact_root),
        attempt=payload.attempt,
        image_map=image_map,
    )
    try:
        node = ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - outside Ray (tests call this directly)
        node = ""
    rec.worker = f"{socket.gethostname()}/{node}/{os.getpid()}"
    return RunTrialTaskResult(record=rec)


@ray.remote(max_retries=0)
def warm(sandbox: SandboxSettings) -> str:
    """Load the trial code and open the Docker engine in this worker process (see ``warm_up_ray``)."""
    import mindforge.agent.loop  # noqa: F401 - imports are the point
    import mindforge.trials.run  # noqa: F401 - imports are the point

    _engine(sandbox)
    return f"{socket.gethostname()}/{os.getpid()}"


@ray.remote(max_retries=0)
def run_trial_task(payload: RunTrialTaskInput) -> RunTrialTaskResult:
    """Ray task wrapper of :func:`run_trial_payload` (retries belong to Temporal, not Ray)."""
    return run_trial_payload(payload)


def replay_entry_payload(payload: ReplayEntryTaskInput) -> ReplayVerdict:
    """Validate one candidate experience entry by replaying it with no model (sandbox, then verifier).

    Args:
        payload: the candidate, its task, the run id, the number of replays and the sandbox settings.

    Returns:
        the verdict (:class:`mindforge.trials.replay.ReplayVerdict`): kept with its
        validation and outputs, or rejected as ``failed`` / ``flaky``.
    """
    from pathlib import Path

    from mindforge.experience.entry import ExperienceEntry
    from mindforge.tasks.loader import load_task
    from mindforge.trials.replay import replay_entry

    engine, image_map = _engine(payload.sandbox)
    return replay_entry(
        ExperienceEntry.model_validate(payload.entry),
        load_task(Path(payload.task_path)),
        engine,
        artifact_root=Path(payload.sandbox.artifact_root),
        run_id=payload.run_id,
        runs=payload.runs,
        image_map=image_map,
    )


@ray.remote(max_retries=0)
def replay_entry_task(payload: ReplayEntryTaskInput) -> ReplayVerdict:
    """Ray task wrapper of :func:`replay_entry_payload` (retries belong to Temporal, not Ray)."""
    return replay_entry_payload(payload)


@ray.remote(max_retries=0)
def check_proposal_task(payload: CheckProposalTaskInput) -> ProposalVerdict:
    """Check one staged Discovery proposal on a Ray node; returns the verdict."""
    from pathlib import Path

    from mindforge.agent.loop import ModelAgent
    from mindforge.discovery.admission import check_proposal
    from mindforge.discovery.checks import PoolIndex
    from mindforge.hcp import loads_contract
    from mindforge.tasks.loader import load_task

    engine, image_map = _engine(payload.sandbox)
    contract = loads_contract(payload.contract_toml)
    pool_index = PoolIndex.from_tasks([load_task(Path(p)) for p in payload.pool_paths], payload.held_out_ids)
    return check_proposal(
        Path(payload.task_dir),
        pool_index,
        engine,
        image_map,
        Path(payload.sandbox.artifact_root),
        make_agent=lambda: ModelAgent(contract, base_url=payload.policy_url, policy_key=payload.sandbox.policy_api_key),
        attempts=payload.attempts,
        run_id=payload.run_id,
    )


def validate_instance_payload(payload: ValidateInstanceTaskInput) -> InstanceVerdict:
    """Validate one family instance as Discovery validates a task: builds, the oracle passes twice, nop fails.

    Args:
        payload: the instance's folder, the run id and the worker's sandbox settings.

    Returns:
        the verdict without its trial records (:func:`mindforge.trials.validate.validate_task`).
    """
    import time
    from pathlib import Path

    from mindforge.errors import InputError
    from mindforge.tasks.loader import load_task
    from mindforge.trials.validate import validate_task

    started = time.monotonic()
    engine, image_map = _engine(payload.sandbox)
    try:
        task = load_task(Path(payload.task_path))
    except InputError as exc:
        return InstanceVerdict(task_hash="", verdict="invalid", reasons=[str(exc)])
    result = validate_task(
        task, engine, artifact_root=Path(payload.sandbox.artifact_root), image_map=image_map,
        oracle_runs=payload.oracle_runs, run_id=payload.run_id,
    )
    if not result.ok and payload.families_dir and (task.config.metadata.model_extra or {}).get("family"):
        from mindforge.discovery.families import load_family
        from mindforge.discovery.family_pool import family_reason

        try:
            result.reasons.insert(0, family_reason(load_family(Path(payload.families_dir) / task.family), task, result))
        except InputError as exc:  # the family itself no longer loads: say that instead
            result.reasons.insert(0, str(exc))
    return InstanceVerdict(
        task_hash=task.content_hash, verdict=result.verdict.value, reasons=result.reasons,
        seconds=time.monotonic() - started,
    )


@ray.remote(max_retries=0)
def validate_instance_task(payload: ValidateInstanceTaskInput) -> InstanceVerdict:
    """Ray task wrapper of :func:`validate_instance_payload` (retries belong to Temporal, not Ray)."""
    return validate_instance_payload(payload)


# ------------------------------------------------------------------ Update stage
#: the training record written into a finished adapter directory (makes a retry a no-op)
TRAIN_RECORD = "mindforge_train.json"


def train_resources() -> dict[str, float]:
    """Ray resources of one training task: a GPU when the cluster has one, else every CPU of one node.

    On CPUs the trainer's matrix products are what an Update waits for, and Ray sets a
    task's ``OMP_NUM_THREADS`` (so torch's thread count) to the CPUs it asked for: a
    one-CPU task trains on one core of two. Measured by ``benchmarks/bench_train_cpu.py``
    (SmolLM2-135M + LoRA, one forward + backward of 4 x 900 tokens in float32, 2-core
    host, 2026-12-02): 41.6 s on one thread, 25.9 s on two (1.61x). The task therefore
    asks for all the CPUs of the largest alive node; it waits
    until they are free (the Update's rollouts are done by then) and blocks other tasks
    on that node while it trains, which is what it costs.
    """
    if ray.cluster_resources().get("GPU"):
        return {"num_cpus": 1, "num_gpus": 1}
    nodes = [n.get("Resources", {}).get("CPU", 0.0) for n in ray.nodes() if n.get("Alive")]
    return {"num_cpus": max([1.0, *nodes]), "num_gpus": 0}


def _report(progress: Any, message: dict[str, Any]) -> None:
    """Put a progress message on the activity's Ray queue; progress is best effort."""
    if progress is None:
        return
    try:
        progress.put_nowait(message)
    except Exception:  # noqa: BLE001 - a full or dead queue must not stop training
        pass


def train_adapter_payload(payload: TrainTaskInput, progress: Any = None) -> TrainAdapterResult:
    """Build samples from the selected trajectories and train a LoRA adapter with GRPO.

    The adapter is trained into a private directory beside ``out_dir`` and renamed into
    place with its training record (:data:`TRAIN_RECORD`), so ``out_dir`` only ever holds
    a finished, immutable adapter; when it already does (a retried activity), its record
    is returned without training again. Private directories a killed run left are removed
    before training starts.

    Args:
        payload: the base model, the selected trajectories, the trainer config, where the
            adapter goes and the parent adapter (or None).
        progress: a ``ray.util.queue.Queue`` for progress messages (``phase``, ``step``,
            ``loss``, ``tokens``, reward statistics), or None.

    Returns:
        the training outcome (also stored as :data:`TRAIN_RECORD` in the adapter).

    Raises:
        InputError: the base model, tokenizer or parent adapter cannot be loaded.
    """
    import json
    import shutil
    import uuid
    from pathlib import Path

    from mindforge.trainer.errors import NoTrainingSignalError
    from mindforge.trainer.grpo import reward_stats, train_grpo

    out_dir = Path(payload.out_dir)
    if (out_dir / TRAIN_RECORD).is_file():
        return TrainAdapterResult.model_validate_json((out_dir / TRAIN_RECORD).read_text(encoding="utf-8"))
    config = payload.config
    base_path = Path(payload.base_model_path)
    _report(progress, {"phase": "building_samples", "trajectories": len(payload.items)})
    built, guides, dropped = _training_samples(payload)
    stats = reward_stats(built.samples)
    rewards = {
        "reward_mean": stats.mean, "reward_std": stats.std, "groups": stats.num_groups, "flat_groups": stats.flat_groups
    }
    _report(progress, {"phase": "training", "step": 0, "samples": len(built.samples), **rewards})
    out: dict[str, Any] = {
        "samples_built": len(built.samples), "guide_samples": guides,
        "samples_dropped": dict(sorted(dropped.items())),
    }

    def on_step(step: int, loss: float, step_stats: dict) -> None:
        keep = ("tokens", "icepop_masked", "clipped", "kl", "grad_norm")
        details = {k: step_stats[k] for k in keep}
        _report(progress, {"phase": "training", "step": step, "loss": loss, **details, **rewards})

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    # a killed earlier run's private directory (its finally never ran): never read, removed now
    for stale in out_dir.parent.glob(f".{out_dir.name}.partial-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = out_dir.parent / f".{out_dir.name}.partial-{uuid.uuid4().hex[:8]}"
    try:
        parent = Path(payload.parent_adapter) if payload.parent_adapter else None
        result = train_grpo(base_path, built.samples, config, tmp, progress_cb=on_step, parent_adapter=parent)
        train = result.model_copy(update={"adapter_dir": out_dir}).model_dump(mode="json")
        out.update(trained=True, adapter_dir=str(out_dir), train=train)
        (tmp / TRAIN_RECORD).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
        try:
            tmp.rename(out_dir)
        except OSError:
            if not (out_dir / TRAIN_RECORD).is_file():  # not a finished twin from a concurrent retry
                raise
            return TrainAdapterResult.model_validate_json((out_dir / TRAIN_RECORD).read_text(encoding="utf-8"))
    except NoTrainingSignalError as exc:
        out.update(trained=False, reason=str(exc))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _report(progress, {"phase": "done", "trained": out["trained"]})
    return TrainAdapterResult.model_validate(out)


def _training_samples(payload: TrainTaskInput) -> tuple[Any, int, Counter[str]]:
    """The samples of ``payload``'s trajectories (guides off-policy), how many are guides, and the drops by reason."""
    from pathlib import Path

    from mindforge.atif import Trajectory, read_trajectory
    from mindforge.errors import InputError
    from mindforge.trainer import build_samples
    from mindforge.trainer.guidance import build_guide_samples, is_guide
    from mindforge.trainer.lora import load_tokenizer

    items: list[tuple[Trajectory, float, str]] = []
    dropped: Counter[str] = Counter()
    for item in payload.items:
        try:
            items.append((read_trajectory(Path(item.trajectory)), float(item.reward), item.group_id))
        except (InputError, OSError, ValueError):
            dropped["unreadable_trajectory"] += 1
    tokenizer = load_tokenizer(Path(payload.base_model_path))
    limit = payload.config.max_seq_len
    built = build_samples([it for it in items if not is_guide(it[0])], tokenizer=tokenizer, max_seq_len=limit)
    guides = build_guide_samples([it for it in items if is_guide(it[0])], tokenizer=tokenizer, max_seq_len=limit)
    dropped.update(built.dropped)
    dropped.update(guides.dropped)
    return built.model_copy(update={"samples": [*built.samples, *guides.samples]}), len(guides.samples), dropped


@ray.remote(max_retries=0)
def train_adapter_task(payload: TrainTaskInput, progress: Any = None) -> TrainAdapterResult:
    """Ray task wrapper of :func:`train_adapter_payload`; submit with :func:`train_resources`."""
    return train_adapter_payload(payload, progress)


@ray.remote(max_retries=0)
def validate_adapter_task(payload: ValidateAdapterInput) -> ValidateTaskResult:
    """Validate an adapter on a Ray node (the probe loads the base model).

    Returns:
        the report, or the :class:`~mindforge.trainer.errors.AdapterValidationError`'s
        class name and message.
    """
    from pathlib import Path

    from mindforge.trainer.errors import AdapterValidationError
    from mindforge.trainer.validate_adapter import validate_adapter

    try:
        report = validate_adapter(Path(payload.adapter_dir), Path(payload.base_model_path), max_rank=payload.max_rank)
    except AdapterValidationError as exc:
        return ValidateTaskResult(error=type(exc).__name__, message=str(exc))
    return ValidateTaskResult(report=report)
