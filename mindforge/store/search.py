"""Repository functions for configuration-search jobs and their candidate contracts.

A job's ``state`` is its last committed step: after a crash, the search resumes from
it rather than from scratch. Candidates are unique per job, so re-adding one after a
retry is a no-op. Functions only flush; the caller's session scope commits.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, select

from mindforge.store._insert import insert_ignore
from mindforge.store.errors import NotFoundError
from mindforge.store.models import RunStatus, SearchCandidate, SearchJob, new_id
from mindforge.trials.record import utcnow


def create_search_job(
    *,
    session: Session,
    lineage_id: str,
    generation_index: int,
    budget: dict[str, Any],
    job_id: str | None = None,
) -> SearchJob:
    """Store a search job (status ``pending``), or return the stored one with ``job_id``.

    Args:
        session: the unit of work.
        lineage_id / generation_index: the generation it searches for (must exist).
        budget: limits as JSON (trials, tokens, seconds...).
        job_id: a deterministic id for idempotent retries; default a random one.

    Returns:
        The stored job (an existing one is returned unchanged).

    Raises:
        sqlalchemy.exc.IntegrityError: the generation does not exist.
    """
    row = SearchJob(id=job_id or new_id(), lineage_id=lineage_id, generation_index=generation_index, budget=budget)
    insert_ignore(session, row)
    return _require_job(session, row.id)


def get_search_job(*, session: Session, job_id: str) -> SearchJob | None:
    """The search job, or None."""
    return session.get(SearchJob, job_id)


def list_search_jobs(*, session: Session, lineage_id: str, generation_index: int | None = None) -> list[SearchJob]:
    """A lineage's search jobs, oldest first, optionally of one generation."""
    statement = (
        select(SearchJob)
        .where(SearchJob.lineage_id == lineage_id)
        .order_by(col(SearchJob.generation_index), col(SearchJob.created_at), col(SearchJob.id))
    )
    if generation_index is not None:
        statement = statement.where(SearchJob.generation_index == generation_index)
    return list(session.exec(statement).all())


def save_search_state(
    *,
    session: Session,
    job_id: str,
    state: dict[str, Any],
    spent: dict[str, Any],
    status: RunStatus | None = None,
    stop_reason: str | None = None,
) -> SearchJob:
    """Commit a search step: replace the job's resume state and spending.

    Args:
        session: the unit of work.
        job_id: the job.
        state: the whole resume state after the step (replaces the stored one).
        spent: consumption so far (replaces the stored one).
        status: new status, or None to leave it.
        stop_reason: why the job stopped, when it did.

    Returns:
        The updated job.

    Raises:
        NotFoundError: no such job.
    """
    job = _require_job(session, job_id)
    job.state = dict(state)
    job.spent = dict(spent)
    if status is not None:
        job.status = status
    if stop_reason is not None:
        job.stop_reason = stop_reason
    job.updated_at = utcnow()
    session.add(job)
    session.flush()
    return job


def add_search_candidate(
    *,
    session: Session,
    job_id: str,
    contract_hash: str,
    parent_hash: str | None,
    edit: str,
    step: int,
) -> bool:
    """Record a candidate contract of a job (the contract must be registered).

    Args:
        session: the unit of work.
        job_id: the job.
        contract_hash: the candidate's hash.
        parent_hash: the contract it was derived from.
        edit: the recorded edit.
        step: the search step that proposed it.

    Returns:
        True when new, False when the job already had this candidate (unchanged).

    Raises:
        sqlalchemy.exc.IntegrityError: unknown job or contract.
    """
    row = SearchCandidate(job_id=job_id, contract_hash=contract_hash, parent_hash=parent_hash, edit=edit, step=step)
    return insert_ignore(session, row)


def list_search_candidates(*, session: Session, job_id: str) -> list[SearchCandidate]:
    """A job's candidates by step, then in the order they were added."""
    statement = (
        select(SearchCandidate)
        .where(SearchCandidate.job_id == job_id)
        .order_by(col(SearchCandidate.step), col(SearchCandidate.created_at), col(SearchCandidate.contract_hash))
    )
    return list(session.exec(statement).all())


def _require_job(session: Session, job_id: str) -> SearchJob:
    job = session.get(SearchJob, job_id)
    if job is None:
        raise NotFoundError("search job", job_id)
    return job
