"""In-process evaluation of one pair on a set of tasks (no Temporal, no Ray).

``mindforge eval`` uses this for quick work; lineages run the same :func:`run_trial`
through Temporal activities and Ray tasks instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import BaseModel, Field

from mindforge.agent.base import Agent
from mindforge.sandbox.docker import DockerEngine
from mindforge.tasks.image_map import ImageMap
from mindforge.tasks.model import Task
from mindforge.trials.record import TrialRecord
from mindforge.trials.run import run_trial


class EvalSummary(BaseModel):
    """Results of an evaluation run.

    Attributes:
        run_id: the run's id.
        contract_hash: the contract evaluated (None for oracle/nop).
        records: one trial record per (task, attempt), ordered by task then attempt.
        pass_rate: passed trials / trials with a real reward (None when none has one).
        solved_tasks: tasks passed at least once.
    """

    run_id: str
    contract_hash: str | None = None
    records: list[TrialRecord] = Field(default_factory=list)
    pass_rate: float | None = None
    solved_tasks: list[str] = Field(default_factory=list)


def evaluate(
    tasks: list[Task],
    make_agent: Callable[[], Agent],
    engine: DockerEngine,
    *,
    attempts: int,
    artifact_root: Path,
    image_map: ImageMap | None = None,
    concurrency: int = 1,
    run_id: str | None = None,
    on_trial: Callable[[TrialRecord], None] | None = None,
) -> EvalSummary:
    """Run ``attempts`` trials of every task with a fresh agent per trial.

    Args:
        tasks: loaded tasks.
        make_agent: builds the agent for one trial (agents keep per-trial state).
        engine: Docker engine wrapper.
        attempts: trials per task (>= 1).
        artifact_root: where trial artifacts go.
        image_map: public-base rewrite map, or None.
        concurrency: trials run at once (threads).
        run_id: default ``eval-<hex>``.
        on_trial: called after each trial (progress).

    Returns:
        the summary; trial ids are ``<task>.<attempt>`` within the run.

    Raises:
        ValueError: ``attempts`` < 1.
    """
    if attempts < 1:
        raise ValueError("attempts must be >= 1")
    run_id = run_id or f"eval-{uuid.uuid4().hex[:8]}"
    jobs = [(t, a) for t in tasks for a in range(attempts)]

    def one(job: tuple[Task, int]) -> TrialRecord:
        task, attempt = job
        rec = run_trial(
            task,
            make_agent(),
            engine,
            run_id=run_id,
            trial_id=f"{task.id}.{attempt}",
            artifact_root=artifact_root,
            attempt=attempt,
            image_map=image_map,
        )
        if on_trial:
            on_trial(rec)
        return rec

    for task in tasks:  # build each image once, before the fan-out
        try:
            engine.build_image(task, image_map=image_map, log_path=None)
        except Exception:  # noqa: BLE001 - each trial retries the build and records the failure class
            pass
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        records = list(pool.map(one, jobs))
    real = [r for r in records if r.has_real_reward]
    return EvalSummary(
        run_id=run_id,
        contract_hash=records[0].contract_hash if records else None,
        records=records,
        pass_rate=(sum(r.passed for r in real) / len(real)) if real else None,
        solved_tasks=sorted({r.task_id for r in records if r.passed}),
    )
