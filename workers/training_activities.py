"""Update activities of the sandbox queue: train the adapter and validate it, each in one Ray task.

The worker of the sandbox queue is a Ray driver: ``train_adapter`` submits the GRPO
training task (it asks for a GPU when the cluster has one) and streams its progress
through a Ray queue into activity heartbeats; ``validate_adapter`` submits the adapter
checks. Both write nothing but the training metrics (``record["update"]["training"]``);
the store activities are in :mod:`workers.update_activities`.

Errors: an ``InputError`` raised inside a Ray task (no base model, a parent adapter that
cannot be loaded) and a validation failure (typed with the validation error's class
name) are non-retryable ``ApplicationError``s; anything else retries.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from mindforge.errors import InputError
from mindforge.payloads import (
    SelectedGroup,
    TrainAdapterInput,
    TrainAdapterResult,
    ValidateAdapterInput,
)
from mindforge.payloads.ray_tasks import (
    TrainingItem,
    TrainTaskInput,
    ValidateTaskResult,
)
from mindforge.payloads.training import AdapterReport, TrainerConfig
from mindforge.store import engine as store_engine
from mindforge.store import trials
from workers.update_activities import merge_update_record, non_retryable_error


class TrainingActivities:
    """Training and validation activities bound to one store and artifact root.

    Args:
        engine: a SQLAlchemy engine of the migrated store.
        artifact_root: adapters go to ``<artifact_root>/adapters/<lineage>/<name>``.
    """

    def __init__(self, engine, artifact_root: Path) -> None:
        self.engine = engine
        self.artifact_root = Path(artifact_root)

    @activity.defn(name="train_adapter")
    async def train_adapter(self, inp: TrainAdapterInput) -> TrainAdapterResult:
        """Train the new revision with GRPO in a Ray task; heartbeat its progress; record the metrics.

        Heartbeat details (visible in the Web UI): ``phase``, ``step``, ``loss``,
        ``tokens``, ``reward_mean``, ``reward_std``, ``groups``. The Update's deadline
        travels in the trainer's settings (:func:`run_config`): the task stops between
        optimizer steps when it comes, and the record says so (``stop_reason``).

        Raises:
            ApplicationError: non-retryable ``InputError`` when the base model, its
                tokenizer or the parent adapter cannot be loaded.
        """
        from ray.util.queue import Queue

        from workers.ray_trials import train_adapter_task, train_resources

        items, missing = await asyncio.to_thread(self._training_items, inp)
        payload = TrainTaskInput(
            base_model_path=inp.update.base_model_path or "",
            items=items,
            config=run_config(inp),
            out_dir=str(self.artifact_root / "adapters" / inp.lineage_id / inp.adapter_name),
            parent_adapter=inp.parent_adapter_path,
        )
        queue = await asyncio.to_thread(Queue, maxsize=10_000, actor_options={"num_cpus": 0})
        ref = train_adapter_task.options(**train_resources()).remote(payload, queue)
        try:
            out = await _await_ray(ref, {"phase": "queued", "trajectories": len(items)}, queue)
        finally:
            await asyncio.to_thread(queue.shutdown)
        dropped = Counter(out.samples_dropped) + missing
        result = out.model_copy(update={"samples_dropped": dict(sorted(dropped.items()))})
        await asyncio.to_thread(self._record_training, inp, result)
        return result

    def _training_items(self, inp: TrainAdapterInput) -> tuple[list[TrainingItem], Counter]:
        missing: Counter[str] = Counter()
        items = []
        with store_engine.session_scope(self.engine) as s:
            for group in inp.groups:
                for trial_id, reward in zip(group.trial_ids, group.rewards, strict=True):
                    row = trials.get_trial(session=s, trial_id=trial_id)
                    path = (row.artifacts or {}).get("trajectory") if row is not None else None
                    if not path:
                        missing["no_trajectory"] += 1
                        continue
                    items.append(
                        TrainingItem(trial_id=trial_id, trajectory=path, reward=reward, group_id=group.group_id)
                    )
                if group.guide is not None:
                    guide = self._write_guide(s, inp, group)
                    if guide is None:
                        missing["guide_unavailable"] += 1
                    else:
                        items.append(guide)
        return items, missing

    def _write_guide(self, session, inp: TrainAdapterInput, group: SelectedGroup) -> TrainingItem | None:
        """Write the group's guide trajectory under ``<artifacts>/guides/<lineage>/g<generation>/``.

        The guide is rendered under the group's contract (the training contract naming the
        adapter its rollouts drew from) from the entry in that contract's snapshot. None
        when the contract, the task or the entry is gone (counted as ``guide_unavailable``).
        """
        from datetime import UTC, datetime

        from mindforge.atif import write_trajectory
        from mindforge.hcp import loads_contract
        from mindforge.store import pool, registry
        from mindforge.tasks.loader import load_task
        from mindforge.trainer.guidance import guide_entries, guide_trajectory

        ref = group.guide
        row = registry.get_contract(session=session, content_hash=group.contract_hash)
        stored = pool.get_task(session=session, content_hash=group.task_hash)
        if ref is None or row is None or stored is None:
            return None
        contract = loads_contract(row.toml_text, source=f"contract {group.contract_hash}")
        entry = guide_entries(contract).get(group.task_hash)
        if entry is None or entry.entry_id != ref.entry_id:
            return None
        task = load_task(Path(stored.path))
        trajectory = guide_trajectory(
            contract, task_id=task.id, task_hash=group.task_hash, instruction=task.instruction, entry=entry,
            ts=datetime.now(UTC).isoformat(), timeout_sec=task.config.agent.timeout_sec,
        )
        out = self.artifact_root / "guides" / inp.lineage_id / f"g{inp.generation}" / inp.adapter_name
        path = write_trajectory(trajectory, out / f"{entry.entry_id}-{group.contract_hash[:12]}.json")
        return TrainingItem(
            trial_id=f"guide:{entry.entry_id}", trajectory=str(path), reward=ref.reward,
            group_id=group.group_id,
        )

    def _record_training(self, inp: TrainAdapterInput, result: TrainAdapterResult) -> None:
        part: dict[str, Any] = {
            "trained": result.trained,
            "reason": result.reason,
            "samples_built": result.samples_built,
            "guide_samples": result.guide_samples,
            "samples_dropped": result.samples_dropped,
        }
        if result.train is not None:
            paths = {"adapter_dir", "base_model_path", "parent_adapter"}
            part.update(result.train.model_dump(mode="json", exclude=paths))
        with store_engine.session_scope(self.engine) as s:
            merge_update_record(s, inp.lineage_id, inp.generation, {"training": part})

    @activity.defn(name="validate_adapter")
    async def validate_adapter(self, inp: ValidateAdapterInput) -> AdapterReport:
        """Validate the trained adapter in a Ray task (files, servability, rank, non-zero, effect).

        Raises:
            ApplicationError: non-retryable, typed with the validation error's class
                (``ZeroAdapterError``, ``RankLimitError``, ...).
        """
        from workers.ray_trials import validate_adapter_task

        out: ValidateTaskResult = await _await_ray(validate_adapter_task.remote(inp), {"phase": "validating"})
        if out.report is None:
            raise ApplicationError(out.message, type=out.error, non_retryable=True)
        return out.report

    def sandbox_activities(self) -> list[Any]:
        """Activities of the sandbox queue (they submit Ray tasks)."""
        return [self.train_adapter, self.validate_adapter]


def run_config(inp: TrainAdapterInput) -> TrainerConfig:
    """The trainer settings of this run: the spec's, with the Update's deadline (``deadline_at``) when it has one."""
    if inp.deadline_at is None:
        return inp.update.trainer
    return inp.update.trainer.model_copy(update={"deadline_at": inp.deadline_at})


async def _await_ray(ref: Any, details: dict[str, Any], progress: Any = None) -> Any:
    """Wait for a Ray task, heartbeating ``details`` (updated from ``progress``) every 2 s.

    On cancellation the Ray task's worker process is killed (``force``): a training task
    deep in torch calls does not see Ray's interrupt, and one left running held 2 CPUs and
    6 GB for minutes after its lineage was cancelled. A killed task leaves no registered
    adapter (registration validates the files after the activity returns). An
    ``InputError`` raised in the task becomes a non-retryable ``ApplicationError``.
    """
    import ray

    try:
        while True:
            if progress is not None:
                details = await asyncio.to_thread(_drain, progress, details)
            activity.heartbeat(details)
            ready, _ = await asyncio.to_thread(ray.wait, [ref], num_returns=1, timeout=2.0)
            if ready:
                return await asyncio.to_thread(_ray_result, ref)
    except asyncio.CancelledError:
        ray.cancel(ref, force=True)
        raise


def _drain(queue: Any, details: dict[str, Any]) -> dict[str, Any]:
    """The latest progress message on ``queue`` (``details`` when there is none)."""
    from ray.util.queue import Empty

    while True:
        try:
            details = queue.get_nowait()
        except Empty:
            return details


def _ray_result(ref: Any) -> Any:
    """``ray.get(ref)``, with an ``InputError`` raised in the task made non-retryable."""
    import ray

    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, InputError):
            raise non_retryable_error(cause) from exc
        raise
