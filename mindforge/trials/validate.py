"""Task validity: does the environment build, does the oracle pass twice, does nop fail?

Verdicts (docs/tasks.md, "Validity"):

* ``valid`` - builds, the reference solution scores 1.0 on both runs, nop scores 0.0;
* ``broken`` - the reference solution scores below 1 (or its verifier errors);
* ``trivially_passing`` - the nop agent scores above 0;
* ``flaky`` - the two oracle runs disagree;
* ``invalid`` - the task failed to load or its environment failed to build;
* ``no_reference`` - no ``solution/solve.sh``: only the nop result is known.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, Field

from mindforge.agent.simple import NopAgent, OracleAgent
from mindforge.sandbox.docker import DockerEngine
from mindforge.tasks.image_map import ImageMap
from mindforge.tasks.model import Task
from mindforge.trials.record import FailureClass, TrialRecord
from mindforge.trials.run import run_trial


class Verdict(StrEnum):
    """Outcome of task validation."""

    VALID = "valid"
    BROKEN = "broken"
    TRIVIALLY_PASSING = "trivially_passing"
    FLAKY = "flaky"
    INVALID = "invalid"
    NO_REFERENCE = "no_reference"


class TaskValidation(BaseModel):
    """Validation result of one task.

    Attributes:
        task_id / path / content_hash: which task (hash empty when it failed to load).
        verdict: see the module docstring.
        reasons: human-readable evidence, one item per finding.
        oracle_rewards: rewards of the oracle runs (None = no real reward).
        nop_reward: reward of the nop run.
        trials: the trial records behind the verdict.
    """

    task_id: str
    path: str
    content_hash: str = ""
    verdict: Verdict
    reasons: list[str] = Field(default_factory=list)
    oracle_rewards: list[float | None] = Field(default_factory=list)
    nop_reward: float | None = None
    trials: list[TrialRecord] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True for ``valid`` (``no_reference`` is not an error only with ``allow_no_reference``)."""
        return self.verdict == Verdict.VALID


def _describe(rec: TrialRecord) -> str:
    if rec.reward is not None:
        return f"reward {rec.reward:g}" + (f" ({rec.failure_detail})" if rec.failure_detail else "")
    return f"{rec.failure_class}: {rec.failure_detail}"


def validate_task(
    task: Task,
    engine: DockerEngine,
    *,
    artifact_root: Path,
    image_map: ImageMap | None = None,
    oracle_runs: int = 2,
    run_id: str | None = None,
    on_trial: Callable[[TrialRecord], None] | None = None,
) -> TaskValidation:
    """Validate one task with ``oracle_runs`` oracle trials and one nop trial.

    Args:
        task: the loaded task.
        engine: Docker engine wrapper.
        artifact_root: where trial artifacts go.
        image_map: public-base rewrite map, or None.
        oracle_runs: oracle repetitions for the stability check (>= 2 to detect flakiness).
        run_id: run id for the trials (default: a fresh ``validate-<hex>``).
        on_trial: called after each trial (progress reporting).

    Returns:
        the validation result; never raises for problems inside the task.
    """
    run_id = run_id or f"validate-{uuid.uuid4().hex[:8]}"
    base = TaskValidation(task_id=task.id, path=str(task.path), content_hash=task.content_hash, verdict=Verdict.VALID)

    def trial(agent, n: int) -> TrialRecord:
        rec = run_trial(
            task,
            agent,
            engine,
            run_id=run_id,
            trial_id=f"{task.id}.{agent.name}.{n}",
            artifact_root=artifact_root,
            attempt=n,
            image_map=image_map,
        )
        base.trials.append(rec)
        if on_trial:
            on_trial(rec)
        return rec

    nop = trial(NopAgent(), 0)
    base.nop_reward = nop.reward
    if nop.failure_class in (FailureClass.ENV_BUILD_FAILED, FailureClass.ENV_START_FAILED):
        base.verdict = Verdict.INVALID
        base.reasons.append(f"environment: {nop.failure_class}: {nop.failure_detail}")
        return base
    if nop.reward is None:
        base.reasons.append(f"nop run: {_describe(nop)}")
    elif nop.reward > 0:
        base.verdict = Verdict.TRIVIALLY_PASSING
        base.reasons.append(f"nop agent scored {nop.reward:g} (> 0): the tests check nothing the agent must do")

    if not task.has_solution:
        if base.verdict == Verdict.VALID:
            base.verdict = Verdict.NO_REFERENCE
            base.reasons.append(f"no solution/solve.sh; nop {_describe(nop)}")
        return base

    oracles = [trial(OracleAgent(), i) for i in range(oracle_runs)]
    base.oracle_rewards = [r.reward for r in oracles]
    if len({r.reward for r in oracles}) > 1:
        base.verdict = Verdict.FLAKY
        base.reasons.append("oracle runs disagree: " + "; ".join(_describe(r) for r in oracles))
    elif any(r.reward is None or r.reward < 1.0 for r in oracles):
        base.verdict = Verdict.BROKEN
        base.reasons.append("reference solution does not pass: " + _describe(oracles[0]))
    elif nop.reward is None:
        base.verdict = Verdict.BROKEN
        base.reasons.append("verifier gave no reward for the nop run")
    return base


def validate_tasks(
    tasks: list[Task],
    engine: DockerEngine,
    *,
    artifact_root: Path,
    image_map: ImageMap | None = None,
    workers: int = 4,
    oracle_runs: int = 2,
    run_id: str | None = None,
    on_trial: Callable[[TrialRecord], None] | None = None,
) -> list[TaskValidation]:
    """Validate many tasks at once: :func:`validate_task` on each, ``workers`` tasks at a time.

    Each distinct image (a family's shared image serves all its instances) is built once
    first, one after the other, so that the threads find it cached; a build that fails
    is left for the task's own trials to record. Every verdict still rests on its own
    trials, each in a fresh sandbox (nop once, the oracle ``oracle_runs`` times). Threads
    suffice: a trial waits on the Docker engine, not on Python.

    Args:
        tasks: the loaded tasks.
        engine: the Docker engine wrapper (shared by the threads).
        artifact_root: where trial artifacts go.
        image_map: public-base rewrite map, or None.
        workers: tasks validated at once (>= 1).
        oracle_runs: oracle repetitions per task.
        run_id: run id of every trial (default a fresh ``validate-<hex>``).
        on_trial: called after each trial, from the worker threads.

    Returns:
        One validation per task, in the order given.

    Raises:
        ValueError: ``workers`` < 1.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    run_id = run_id or f"validate-{uuid.uuid4().hex[:8]}"
    built: set[str] = set()
    for task in tasks:
        if task.run_image not in built:
            built.add(task.run_image)
            try:
                engine.build_image(task, image_map=image_map, log_path=None)
            except Exception:  # noqa: BLE001 - the task's trials build again and record the failure class
                pass

    def one(task: Task) -> TaskValidation:
        return validate_task(task, engine, artifact_root=artifact_root, image_map=image_map,
                             oracle_runs=oracle_runs, run_id=run_id, on_trial=on_trial)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, tasks))
