"""Repository functions for trials and their audits.

A trial's primary key is a deterministic id (:func:`make_trial_id`), and
:func:`insert_trial` is insert-if-absent: an activity that is retried after storing
part of a batch stores each trial once, and the first stored result wins. Functions
only flush; the caller's session scope commits.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from sqlmodel import Session, col, select

from mindforge.domain import TrialStage
from mindforge.evaluation.stages import check_stage_split
from mindforge.store._insert import insert_ignore
from mindforge.store.models import Audit, AuditOwner, Trial
from mindforge.store.pool import split_of
from mindforge.trials.record import FailureClass, TrialRecord

_TRIAL_STAGES = frozenset(s.value for s in TrialStage)


def make_trial_id(
    *,
    lineage_id: str,
    generation_index: int,
    stage: str,
    task_hash: str,
    contract_hash: str | None,
    adapter: str,
    attempt: int,
    round_key: str | None = None,
) -> str:
    """The deterministic id of one attempt of one task under one pair in one stage.

    Args:
        lineage_id / generation_index / stage: where the trial runs.
        task_hash: the task's content hash.
        contract_hash: the HCP contract's hash (None for oracle/nop trials).
        adapter: the adapter name served ("" = base weights); part of the key because
            held-out evaluation runs parent and successor in the same stage.
        attempt: 0-based attempt index within the task's group.
        round_key: what else tells this trial apart, e.g. ``"i2.d1"`` for iteration 2,
            draw 1 of an Update's on-policy loop (None = nothing; older ids unchanged).

    Returns:
        ``"t-"`` and 40 hex characters of a sha256 over the parts.
    """
    parts: list[object] = [lineage_id, generation_index, stage, task_hash, contract_hash, adapter, attempt]
    if round_key is not None:
        parts.append(round_key)
    digest = hashlib.sha256(json.dumps(parts, separators=(",", ":")).encode()).hexdigest()
    return f"t-{digest[:40]}"


def insert_trial(
    *,
    session: Session,
    record: TrialRecord,
    lineage_id: str | None = None,
    generation_index: int | None = None,
    stage: str = "",
) -> bool:
    """Store a trial unless one with the same ``trial_id`` is stored.

    Args:
        session: the unit of work.
        record: the trial; its ``trial_id`` is the key.
        lineage_id / generation_index: the generation the trial belongs to (which must
            exist), or both None for trials outside a lineage (task validation).
        stage: the stage that ran it (``expansion``, ``search``, ``eval``...).

    Returns:
        True when stored, False when the id existed (nothing changed, no error).

    Raises:
        sqlalchemy.exc.IntegrityError: the generation does not exist.
        mindforge.evaluation.StageSplitError: a lineage trial whose stage is a
            :class:`~mindforge.domain.TrialStage` and whose task is in the lineage's pool
            on another split than the stage allows (a sealed task stored as ``search``, a
            search task as ``sealed``...). Tasks outside the pool (task validation, the
            planners check those) and other stages (``eval``) are not checked here.
    """
    if lineage_id is not None and stage in _TRIAL_STAGES:
        split = split_of(session=session, lineage_id=lineage_id, task_hash=record.task_hash)
        if split is not None:
            check_stage_split(
                trial_id=record.trial_id, stage=TrialStage(stage), split=split, task_hash=record.task_hash
            )
    row = Trial.from_record(record, lineage_id=lineage_id, generation_index=generation_index, stage=stage)
    return insert_ignore(session, row)


def insert_trials(
    *,
    session: Session,
    records: Iterable[TrialRecord],
    lineage_id: str | None = None,
    generation_index: int | None = None,
    stage: str = "",
) -> int:
    """Store a batch of trials with :func:`insert_trial`; returns how many were new."""
    return sum(
        insert_trial(
            session=session, record=record, lineage_id=lineage_id, generation_index=generation_index, stage=stage
        )
        for record in records
    )


def trial_exists(*, session: Session, trial_id: str) -> bool:
    """True when a trial with this id is stored."""
    return session.exec(select(Trial.trial_id).where(Trial.trial_id == trial_id)).first() is not None


def get_trial(*, session: Session, trial_id: str) -> Trial | None:
    """The stored trial, or None."""
    return session.get(Trial, trial_id)


def list_trials(
    *,
    session: Session,
    lineage_id: str | None = None,
    generation_index: int | None = None,
    stage: str | None = None,
    run_id: str | None = None,
    task_hash: str | None = None,
    contract_hash: str | None = None,
    adapter: str | None = None,
    passed: bool | None = None,
    failure_class: FailureClass | None = None,
    limit: int | None = None,
) -> list[Trial]:
    """Stored trials matching every given filter (None = any), by start time.

    Args:
        passed: True = reward 1.0 only; False = every other trial (reward below 1 or
            no real reward).
        limit: at most this many rows.
    """
    filters: dict[str, Any] = {
        "lineage_id": lineage_id,
        "generation_index": generation_index,
        "stage": stage,
        "run_id": run_id,
        "task_hash": task_hash,
        "contract_hash": contract_hash,
        "adapter": adapter,
        "failure_class": failure_class,
    }
    statement = select(Trial).order_by(col(Trial.started_at), col(Trial.trial_id))
    for name, value in filters.items():
        if value is not None:
            statement = statement.where(getattr(Trial, name) == value)
    if passed is True:
        statement = statement.where(col(Trial.reward) >= 1.0)
    elif passed is False:
        statement = statement.where((col(Trial.reward) < 1.0) | col(Trial.reward).is_(None))
    if limit is not None:
        statement = statement.limit(limit)
    return list(session.exec(statement).all())


def record_audit(
    *,
    session: Session,
    trial_id: str,
    failure_class: FailureClass,
    owner: AuditOwner,
    evidence: dict[str, Any],
    judged_by: str,
) -> bool:
    """Store the audit of a stored trial unless it already has one.

    Args:
        session: the unit of work.
        trial_id: the audited trial (must be stored).
        failure_class: the class the audit settled on.
        owner: infra, task, config or model.
        evidence: JSON-serializable evidence.
        judged_by: ``"rules"`` or ``"judge:<model>"``.

    Returns:
        True when stored, False when the trial was already audited (unchanged).

    Raises:
        sqlalchemy.exc.IntegrityError: the trial is not stored.
    """
    row = Audit(trial_id=trial_id, failure_class=failure_class, owner=owner, evidence=evidence, judged_by=judged_by)
    return insert_ignore(session, row)


def get_audit(*, session: Session, trial_id: str) -> Audit | None:
    """The trial's audit, or None."""
    return session.get(Audit, trial_id)


def list_audits(
    *,
    session: Session,
    lineage_id: str | None = None,
    generation_index: int | None = None,
    stage: str | None = None,
    owner: AuditOwner | None = None,
) -> list[Audit]:
    """Audits of the trials matching every given filter (None = any), by trial start time."""
    statement = select(Audit).join(Trial, col(Trial.trial_id) == col(Audit.trial_id))
    statement = statement.order_by(col(Trial.started_at), col(Trial.trial_id))
    if lineage_id is not None:
        statement = statement.where(Trial.lineage_id == lineage_id)
    if generation_index is not None:
        statement = statement.where(Trial.generation_index == generation_index)
    if stage is not None:
        statement = statement.where(Trial.stage == stage)
    if owner is not None:
        statement = statement.where(Audit.owner == owner)
    return list(session.exec(statement).all())
