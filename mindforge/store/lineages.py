"""Repository functions for lineages and their generations.

Every function takes the session by keyword (after fastapi's full-stack template
``crud.py``) and only flushes: the caller's :func:`~mindforge.store.engine.session_scope`
commits. Creation is idempotent where an activity may be retried.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from mindforge.store._insert import insert_ignore
from mindforge.store.errors import AlreadyExistsError, NotFoundError
from mindforge.store.models import Generation, Lineage, LineageCreate, RunStatus
from mindforge.trials.record import utcnow


def create_lineage(*, session: Session, lineage_in: LineageCreate) -> Lineage:
    """Store a new lineage (status ``pending``, generation 0).

    Args:
        session: the unit of work.
        lineage_in: name, spec and optional workflow id.

    Returns:
        The stored lineage.

    Raises:
        AlreadyExistsError: a lineage with this name exists.
    """
    row = Lineage.model_validate(lineage_in)
    if not insert_ignore(session, row):
        raise AlreadyExistsError(f"lineage name {row.name!r} is taken")
    return _require_lineage(session, row.id)


def get_lineage(*, session: Session, lineage_id: str) -> Lineage | None:
    """The lineage with this id, or None."""
    return session.get(Lineage, lineage_id)


def get_lineage_by_name(*, session: Session, name: str) -> Lineage | None:
    """The lineage with this name, or None."""
    return session.exec(select(Lineage).where(Lineage.name == name)).first()


def list_lineages(*, session: Session, status: RunStatus | None = None) -> list[Lineage]:
    """Lineages, oldest first, optionally only those with ``status``."""
    statement = select(Lineage).order_by(col(Lineage.created_at), col(Lineage.id))
    if status is not None:
        statement = statement.where(Lineage.status == status)
    return list(session.exec(statement).all())


def update_lineage(
    *,
    session: Session,
    lineage_id: str,
    status: RunStatus | None = None,
    current_generation: int | None = None,
    workflow_id: str | None = None,
) -> Lineage:
    """Change a lineage's status, current generation or workflow id (None = leave as is).

    Raises:
        NotFoundError: no such lineage.
    """
    lineage = _require_lineage(session, lineage_id)
    if status is not None:
        lineage.status = status
    if current_generation is not None:
        lineage.current_generation = current_generation
    if workflow_id is not None:
        lineage.workflow_id = workflow_id
    lineage.updated_at = utcnow()
    session.add(lineage)
    session.flush()
    return lineage


def merge_lineage_spec(*, session: Session, lineage_id: str, values: dict[str, Any]) -> Lineage:
    """Merge ``values`` into a lineage's stored spec (top-level keys replaced; what the lineage records beside it).

    Used for the records kept with the spec that a lineage updates as it runs - its sealed
    readings (``readings``), relabelled as it mines - never for the settings it was started with.

    Raises:
        NotFoundError: no such lineage.
    """
    lineage = _require_lineage(session, lineage_id)
    lineage.spec = {**(lineage.spec or {}), **values}  # a new dict: JSON columns do not track in-place changes
    lineage.updated_at = utcnow()
    session.add(lineage)
    session.flush()
    return lineage


def create_generation(
    *,
    session: Session,
    lineage_id: str,
    index: int,
    contract_hash: str | None = None,
    adapter_revision_id: str | None = None,
    exist_ok: bool = False,
) -> Generation:
    """Store generation ``index`` of a lineage (status ``pending``).

    Args:
        session: the unit of work.
        lineage_id: the lineage (must exist).
        index: 0-based generation index, unique within the lineage.
        contract_hash: the registered contract the generation runs (None until picked).
        adapter_revision_id: the adapter revision in use (None = base weights).
        exist_ok: return the existing generation instead of raising (for retried
            activities); its fields are left as they are.

    Returns:
        The stored (or, with ``exist_ok``, the existing) generation.

    Raises:
        AlreadyExistsError: the generation exists and ``exist_ok`` is False.
        sqlalchemy.exc.IntegrityError: the lineage, contract or adapter is unknown.
    """
    row = Generation(
        lineage_id=lineage_id, index=index, contract_hash=contract_hash, adapter_revision_id=adapter_revision_id
    )
    if not insert_ignore(session, row) and not exist_ok:
        raise AlreadyExistsError(f"lineage {lineage_id!r} already has generation {index}")
    return _require_generation(session, lineage_id, index)


def get_generation(*, session: Session, lineage_id: str, index: int) -> Generation | None:
    """Generation ``index`` of the lineage, or None."""
    statement = select(Generation).where(Generation.lineage_id == lineage_id, Generation.index == index)
    return session.exec(statement).first()


def list_generations(*, session: Session, lineage_id: str) -> list[Generation]:
    """The lineage's generations by index."""
    statement = select(Generation).where(Generation.lineage_id == lineage_id).order_by(col(Generation.index))
    return list(session.exec(statement).all())


def update_generation(
    *,
    session: Session,
    lineage_id: str,
    index: int,
    status: RunStatus | None = None,
    contract_hash: str | None = None,
    adapter_revision_id: str | None = None,
    record: dict[str, Any] | None = None,
    started_at: datetime | None = None,
    finished_at: datetime | None = None,
) -> Generation:
    """Change a generation (None = leave as is); ``record`` keys are merged into the stored record.

    Raises:
        NotFoundError: no such generation.
    """
    generation = _require_generation(session, lineage_id, index)
    if status is not None:
        generation.status = status
    if contract_hash is not None:
        generation.contract_hash = contract_hash
    if adapter_revision_id is not None:
        generation.adapter_revision_id = adapter_revision_id
    if record:
        # a new dict: JSON columns do not track in-place changes
        generation.record = {**generation.record, **record}
    if started_at is not None:
        generation.started_at = started_at
    if finished_at is not None:
        generation.finished_at = finished_at
    session.add(generation)
    session.flush()
    return generation


def mark_stage_run(*, session: Session, lineage_id: str, generation_index: int, stage: str) -> bool:
    """Record that ``stage`` completed in a generation, on the generation and on its lineage.

    Args:
        session: the unit of work.
        lineage_id: the lineage.
        generation_index: the generation (must exist).
        stage: the stage name (``discovery``, ``expansion``, ``update``...).

    Returns:
        True when newly recorded, False when it was already (a retried activity).

    Raises:
        NotFoundError: no such lineage or generation.
    """
    generation = _require_generation(session, lineage_id, generation_index)
    lineage = _require_lineage(session, lineage_id)
    if stage in generation.stages_run:
        return False
    generation.stages_run = [*generation.stages_run, stage]
    key = str(generation_index)
    lineage.stages_run = {**lineage.stages_run, key: [*lineage.stages_run.get(key, []), stage]}
    lineage.updated_at = utcnow()
    session.add_all([generation, lineage])
    session.flush()
    return True


def _require_lineage(session: Session, lineage_id: str) -> Lineage:
    lineage = session.get(Lineage, lineage_id)
    if lineage is None:
        raise NotFoundError("lineage", lineage_id)
    return lineage


def _require_generation(session: Session, lineage_id: str, index: int) -> Generation:
    generation = get_generation(session=session, lineage_id=lineage_id, index=index)
    if generation is None:
        raise NotFoundError("generation", f"{lineage_id}/{index}")
    return generation
