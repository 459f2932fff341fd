"""Checks, difficulty, ids and provenance of proposals; registration in the store.

:func:`check_proposal` runs on one materialised proposal, in this order: it must load,
pass the static checks (:mod:`mindforge.discovery.checks`), pass task validation
(:func:`mindforge.trials.validate.validate_task`: builds within its limit, the reference
solution passes twice, nop fails), and must not be solved by the current pair on every
attempt (its success rate is the difficulty estimate). :func:`mindforge.store.discovered.admit_to_store`
moves admitted tasks to :func:`discovered_dir` and registers them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mindforge.agent.base import Agent
from mindforge.discovery.checks import SIMILARITY_THRESHOLD, PoolIndex, static_checks
from mindforge.discovery.records import (
    DifficultyEstimate,
    PairInfo,
    ProposalVerdict,
    RejectReason,
)
from mindforge.errors import InputError
from mindforge.sandbox.docker import DockerEngine
from mindforge.tasks.image_map import ImageMap
from mindforge.tasks.loader import load_task
from mindforge.tasks.model import Task
from mindforge.trials.batch import evaluate
from mindforge.trials.record import FailureClass, TrialRecord, utcnow
from mindforge.trials.validate import Verdict, validate_task

_VERDICT_REASON = {
    Verdict.BROKEN: RejectReason.BROKEN,
    Verdict.TRIVIALLY_PASSING: RejectReason.TRIVIALLY_PASSING,
    Verdict.FLAKY: RejectReason.FLAKY,
    Verdict.INVALID: RejectReason.INVALID,
    Verdict.NO_REFERENCE: RejectReason.INVALID,
}


def estimate_difficulty(
    task: Task,
    make_agent: Callable[[], Agent],
    engine: DockerEngine,
    *,
    attempts: int,
    artifact_root: Path,
    image_map: ImageMap | None = None,
    run_id: str | None = None,
    on_trial: Callable[[TrialRecord], None] | None = None,
) -> DifficultyEstimate:
    """The current pair's success rate on ``task`` over ``attempts`` trials.

    Args:
        task: the task.
        make_agent: builds the current pair's agent (a ``ModelAgent``) for one trial.
        engine: Docker engine wrapper.
        attempts: trials (>= 1).
        artifact_root: where trial artifacts go.
        image_map: public-base rewrite map, or None.
        run_id: the evaluation run id (default a fresh ``difficulty-<hex>``).
        on_trial: called after each trial.

    Returns:
        The estimate; ``success_rate`` is None when no trial had a real reward.

    Raises:
        ValueError: ``attempts`` < 1.
    """
    summary = evaluate(
        [task],
        make_agent,
        engine,
        attempts=attempts,
        artifact_root=artifact_root,
        image_map=image_map,
        run_id=run_id or f"difficulty-{uuid.uuid4().hex[:8]}",
        on_trial=on_trial,
    )
    scored = [r for r in summary.records if r.has_real_reward]
    successes = sum(r.passed for r in scored)
    return DifficultyEstimate(
        attempts=len(summary.records),
        successes=successes,
        scored=len(scored),
        success_rate=(successes / len(scored)) if scored else None,
        trial_ids=[r.trial_id for r in summary.records],
        run_id=summary.run_id,
    )


def check_proposal(
    task_dir: Path,
    pool_index: PoolIndex,
    engine: DockerEngine,
    image_map: ImageMap | None,
    artifact_root: Path,
    *,
    make_agent: Callable[[], Agent] | None,
    attempts: int = 2,
    oracle_runs: int = 2,
    run_id: str | None = None,
    threshold: float = SIMILARITY_THRESHOLD,
    on_trial: Callable[[TrialRecord], None] | None = None,
) -> ProposalVerdict:
    """Check one materialised proposal: load, static checks, validation, difficulty.

    Args:
        task_dir: the task directory in the staging area.
        pool_index: the pool for the duplicate checks.
        engine: Docker engine wrapper.
        image_map: public-base rewrite map, or None.
        artifact_root: where trial artifacts go.
        make_agent: builds the current pair's agent for the difficulty estimate; None
            skips the estimate (and the ``too_easy`` check).
        attempts: trials of the current pair (>= 1).
        oracle_runs: reference-solution runs in validation (>= 2 detects flakiness).
        run_id: run id of the trials (default a fresh ``discovery-<hex>``).
        threshold: near-duplicate similarity threshold.
        on_trial: called after each trial (progress).

    Returns:
        The verdict; ``reason`` is None when the proposal passed every check. Never
        raises for defects of the proposal itself.
    """
    run_id = run_id or f"discovery-{uuid.uuid4().hex[:8]}"
    out = ProposalVerdict(task_id=Path(task_dir).name, path=str(task_dir))
    try:
        task = load_task(Path(task_dir))
    except InputError as exc:
        out.reason, out.detail = RejectReason.INVALID, str(exc)
        return out
    out.content_hash = task.content_hash
    rejection = static_checks(task, pool_index, threshold=threshold)
    if rejection is not None:
        out.reason, out.detail = rejection.reason, rejection.detail
        return out
    validation = validate_task(
        task, engine, artifact_root=artifact_root, image_map=image_map, oracle_runs=oracle_runs, run_id=run_id,
        on_trial=on_trial,
    )
    out.validation_verdict = validation.verdict.value
    out.oracle_rewards, out.nop_reward = validation.oracle_rewards, validation.nop_reward
    if validation.verdict != Verdict.VALID:
        out.reason = _VERDICT_REASON[validation.verdict]
        if validation.trials and validation.trials[0].failure_class == FailureClass.ENV_BUILD_FAILED:
            out.reason = RejectReason.ENV_BUILD_FAILED
        out.detail = "; ".join(validation.reasons)[:2000]
        return out
    out.detail = f"valid: oracle {out.oracle_rewards}, nop {out.nop_reward}"
    if make_agent is None:
        return out
    est = estimate_difficulty(
        task,
        make_agent,
        engine,
        attempts=attempts,
        artifact_root=artifact_root,
        image_map=image_map,
        run_id=run_id,
        on_trial=on_trial,
    )
    out.difficulty = est
    if est.success_rate is None:
        out.reason = RejectReason.ESTIMATE_FAILED
        out.detail = f"none of {est.attempts} attempts of the current pair got a real reward"
    elif est.success_rate >= 1.0:
        out.reason = RejectReason.TOO_EASY
        out.detail = f"the current pair solved it on all {est.scored} attempts"
    else:
        out.detail += f"; current pair {est.successes}/{est.scored}"
    return out


def unique_task_id(proposed_id: str, generation: int, taken: set[str]) -> str:
    """``g<generation>-<proposed_id>``, with ``-2``, ``-3``, ... appended while the id is taken."""
    base = f"g{generation}-{proposed_id}"
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def make_provenance(
    verdict: ProposalVerdict, *, proposed_id: str, pair: PairInfo, generation: int, run_id: str,
    lineage_id: str | None = None,
) -> dict[str, Any]:
    """The provenance JSON stored with an admitted task.

    Returns:
        ``{"generation", "lineage_id", "discovery_run_id", "proposed_id", "proposed_by"
        (the pair), "content_hash", "validation" (verdict and rewards), "difficulty"
        (the estimate, or None), "admitted_at"}``.
    """
    return {
        "generation": generation,
        "lineage_id": lineage_id,
        "discovery_run_id": run_id,
        "proposed_id": proposed_id,
        "proposed_by": pair.model_dump(),
        "content_hash": verdict.content_hash,
        "validation": {
            "verdict": verdict.validation_verdict,
            "oracle_rewards": verdict.oracle_rewards,
            "nop_reward": verdict.nop_reward,
        },
        "difficulty": verdict.difficulty.model_dump() if verdict.difficulty else None,
        "admitted_at": utcnow().isoformat(),
    }


def discovered_dir(artifact_root: Path, lineage_id: str, task_id: str) -> Path:
    """Permanent home of an admitted task: ``<artifacts>/discovered/<lineage>/<task_id>``."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in lineage_id)
    return Path(artifact_root) / "discovered" / safe / task_id
