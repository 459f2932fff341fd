"""Repository functions for a lineage's experience library: entries, snapshots, rejections.

The store is the last guard of the evidence rule for experience: :func:`add_entries`
refuses an entry whose task is not on the lineage's **search** split (a selection or
sealed task, or a task outside the pool), raising
:class:`~mindforge.experience.mining.SplitRefused` naming the task, its split and the
lineage. Writes are insert-if-absent on deterministic keys (entry id, snapshot id), so an
activity retried after a crash stores nothing twice. Functions only flush; the caller's
session scope commits.
"""

from __future__ import annotations

from collections import Counter

from sqlmodel import Session, col, select

from mindforge.evaluation.splits import PoolSplit
from mindforge.experience.entry import ExperienceEntry, Provenance
from mindforge.experience.mining import SplitRefused
from mindforge.experience.snapshot import ExperienceSnapshot, load_snapshot
from mindforge.experience.validation import Rejection, RejectionReason
from mindforge.store._insert import insert_ignore
from mindforge.store.errors import StoreError
from mindforge.store.models import (
    ExperienceEntryRow,
    ExperienceRejectionRow,
    ExperienceSnapshotRow,
    Lineage,
    PoolMembership,
)


def _lineage_name(session: Session, lineage_id: str) -> str:
    row = session.get(Lineage, lineage_id)
    return row.name if row is not None else lineage_id


def check_entry_split(*, session: Session, lineage_id: str, task_id: str, task_hash: str) -> None:
    """Raise :class:`SplitRefused` unless the task is on the lineage's search split."""
    membership = session.get(PoolMembership, (lineage_id, task_hash))
    split = membership.split if membership is not None else None
    if split != PoolSplit.SEARCH:
        raise SplitRefused(task_id, str(split) if split else "none", _lineage_name(session, lineage_id))


def add_entries(*, session: Session, lineage_id: str, entries: list[ExperienceEntry]) -> int:
    """Store validated entries in the lineage's library.

    Args:
        session: the unit of work.
        lineage_id: the lineage.
        entries: validated entries (every replay passed), each from a search-split task.

    Returns:
        how many were new (an entry already stored is left as it is).

    Raises:
        SplitRefused: an entry's task is not on the lineage's search split (nothing of
            this call is written when the first entry is refused; checks run before writes).
        StoreError: an entry is not validated.
    """
    for entry in entries:
        check_entry_split(session=session, lineage_id=lineage_id, task_id=entry.task_id, task_hash=entry.task_hash)
        if entry.validation is None or not entry.validation.passed:
            raise StoreError(f"experience entry {entry.entry_id} is not validated: every replay must pass")
    added = 0
    for entry in entries:
        row = ExperienceEntryRow(
            lineage_id=lineage_id,
            entry_id=entry.entry_id,
            task_id=entry.task_id,
            task_hash=entry.task_hash,
            provenance=str(entry.provenance),
            trial_id=entry.trial_id,
            generation_index=entry.generation,
            entry=entry.model_dump(mode="json"),
        )
        added += insert_ignore(session, row)
    return added


def list_entries(*, session: Session, lineage_id: str) -> list[ExperienceEntry]:
    """The lineage's stored entries, in entry-id order."""
    statement = select(ExperienceEntryRow).where(ExperienceEntryRow.lineage_id == lineage_id)
    rows = session.exec(statement.order_by(col(ExperienceEntryRow.entry_id))).all()
    return [ExperienceEntry.model_validate(row.entry) for row in rows]


def judged_oracle_tasks(*, session: Session, lineage_id: str) -> set[str]:
    """Content hashes of the tasks whose reference solution the lineage has judged: kept or rejected."""
    oracle = str(Provenance.ORACLE)
    kept = select(ExperienceEntryRow.task_hash).where(
        ExperienceEntryRow.lineage_id == lineage_id, ExperienceEntryRow.provenance == oracle
    )
    rejected = select(ExperienceRejectionRow.task_hash).where(
        ExperienceRejectionRow.lineage_id == lineage_id, ExperienceRejectionRow.provenance == oracle
    )
    return set(session.exec(kept).all()) | set(session.exec(rejected).all())


def library_counts(*, session: Session, lineage_id: str) -> dict[str, int]:
    """The lineage's stored entries by provenance (``oracle``, ``model``: both keys always present)."""
    statement = select(ExperienceEntryRow.provenance).where(ExperienceEntryRow.lineage_id == lineage_id)
    found = Counter(session.exec(statement).all())
    return {str(p): found.get(str(p), 0) for p in Provenance}


def record_rejections(*, session: Session, lineage_id: str, generation_index: int, rejections: list[Rejection]) -> int:
    """Store rejected candidates (once per lineage, generation and entry). Returns how many were new."""
    added = 0
    for rejection in rejections:
        row = ExperienceRejectionRow(
            lineage_id=lineage_id,
            generation_index=generation_index,
            entry_id=rejection.entry_id,
            task_id=rejection.task_id,
            task_hash=rejection.task_hash,
            provenance=str(rejection.provenance),
            trial_id=rejection.trial_id,
            reason=str(rejection.reason),
            detail=rejection.detail,
        )
        added += insert_ignore(session, row)
    return added


def rejection_counts(*, session: Session, lineage_id: str, generation_index: int | None = None) -> dict[str, int]:
    """Rejections by reason (every reason a key), over the lineage or one generation."""
    statement = select(ExperienceRejectionRow.reason).where(ExperienceRejectionRow.lineage_id == lineage_id)
    if generation_index is not None:
        statement = statement.where(ExperienceRejectionRow.generation_index == generation_index)
    found = Counter(session.exec(statement).all())
    return {str(reason): found.get(str(reason), 0) for reason in RejectionReason}


def publish_snapshot(
    *, session: Session, lineage_id: str, generation_index: int, snapshot: ExperienceSnapshot
) -> ExperienceSnapshotRow:
    """Store a snapshot (insert-if-absent by its content hash) and return its row."""
    counts = snapshot.counts()
    row = ExperienceSnapshotRow(
        lineage_id=lineage_id,
        snapshot_id=snapshot.snapshot_id,
        generation_index=generation_index,
        entry_ids=[e.entry_id for e in snapshot.entries],
        oracle_entries=counts["oracle"],
        model_entries=counts["model"],
        document=snapshot.to_json(),
    )
    insert_ignore(session, row)
    stored = session.get(ExperienceSnapshotRow, (lineage_id, snapshot.snapshot_id))
    if stored is None:
        raise StoreError(f"experience snapshot {snapshot.snapshot_id} vanished while being published")
    return stored


def get_snapshot(*, session: Session, lineage_id: str, snapshot_id: str) -> ExperienceSnapshot | None:
    """The stored snapshot with this id, or None."""
    row = session.get(ExperienceSnapshotRow, (lineage_id, snapshot_id))
    return load_snapshot(row.document, f"experience_snapshots/{snapshot_id}") if row is not None else None


def latest_snapshot_row(*, session: Session, lineage_id: str) -> ExperienceSnapshotRow | None:
    """The lineage's most recently published snapshot row (highest generation, then newest), or None."""
    statement = (
        select(ExperienceSnapshotRow)
        .where(ExperienceSnapshotRow.lineage_id == lineage_id)
        .order_by(col(ExperienceSnapshotRow.generation_index).desc(), col(ExperienceSnapshotRow.created_at).desc())
    )
    return session.exec(statement).first()


def latest_snapshot(*, session: Session, lineage_id: str) -> ExperienceSnapshot | None:
    """The lineage's latest validated snapshot, or None when none was published."""
    row = latest_snapshot_row(session=session, lineage_id=lineage_id)
    return load_snapshot(row.document, f"experience_snapshots/{row.snapshot_id}") if row is not None else None
