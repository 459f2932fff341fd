"""Repository functions for infrastructure attempts: trial runs a fault ended, to be run again.

A row says a trial ran and an infrastructure fault ended it (the sandbox engine, the
policy endpoint, a lost Ray worker), so it has no reward and runs again; the trial's own
row in ``trials`` comes from the run that ends cleanly. Functions only flush; the
caller's session scope commits.
"""

from __future__ import annotations

from sqlmodel import Session, col, select

from mindforge.store._insert import insert_ignore
from mindforge.store.models import InfraAttempt
from mindforge.trials.record import TrialRecord


def record_infra_attempt(
    *,
    session: Session,
    record: TrialRecord,
    lineage_id: str,
    generation_index: int,
    stage: str,
    activity_attempt: int,
) -> bool:
    """Store one fault-ended run of a trial; insert-if-absent on (trial id, attempt).

    Args:
        session: the unit of work.
        record: the trial record the fault ended (its ``failure_class`` one of
            :data:`mindforge.trials.record.RETRYABLE_INFRA_CLASSES`).
        lineage_id / generation_index / stage: where the trial runs.
        activity_attempt: the 1-based Temporal attempt of the activity that ran it.

    Returns:
        True when stored, False when this (trial, attempt) was stored already.

    Raises:
        ValueError: the record has a reward or no failure class (it is not a fault).
        sqlalchemy.exc.IntegrityError: the generation does not exist.
    """
    if record.reward is not None or record.failure_class is None:
        raise ValueError(f"trial {record.trial_id} has a reward or no failure class: not an infrastructure attempt")
    row = InfraAttempt(
        trial_id=record.trial_id,
        activity_attempt=activity_attempt,
        lineage_id=lineage_id,
        generation_index=generation_index,
        stage=stage,
        task_id=record.task_id,
        failure_class=record.failure_class,
        failure_detail=record.failure_detail[:2000],
        worker=record.worker,
    )
    return insert_ignore(session, row)


def list_infra_attempts(
    *, session: Session, lineage_id: str | None = None, generation_index: int | None = None
) -> list[InfraAttempt]:
    """Stored infrastructure attempts matching the filters (None = any), oldest first."""
    query = select(InfraAttempt)
    if lineage_id is not None:
        query = query.where(InfraAttempt.lineage_id == lineage_id)
    if generation_index is not None:
        query = query.where(InfraAttempt.generation_index == generation_index)
    return list(session.exec(query.order_by(col(InfraAttempt.created_at))).all())
