"""An experience snapshot: an immutable, content-addressed set of validated entries.

The snapshot's id is the sha256 (hex) of its canonical JSON (:meth:`ExperienceSnapshot.to_json`:
sorted keys, entries in entry-id order, one-space indent), so the same entries always give the
same id. A contract carries the snapshot as an HCP embedded resource of kind ``experience``
whose ``sha256`` is that id (:mod:`mindforge.experience.contract`), so the contract's content
hash changes whenever the snapshot does.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mindforge.errors import InputError
from mindforge.experience.entry import ExperienceEntry, Provenance

#: the snapshot document's format version
SNAPSHOT_VERSION = 1


class ExperienceSnapshot(BaseModel):
    """A set of validated entries (immutable; entries sorted by id, ids unique).

    Attributes:
        version: the document format (1).
        entries: the entries, each validated (``validation`` set and passed).
    """

    model_config = ConfigDict(frozen=True)

    version: int = SNAPSHOT_VERSION
    entries: tuple[ExperienceEntry, ...] = Field(default_factory=tuple)

    @field_validator("entries")
    @classmethod
    def _entries(cls, value: tuple[ExperienceEntry, ...]) -> tuple[ExperienceEntry, ...]:
        ids = [e.entry_id for e in value]
        if len(set(ids)) != len(ids):
            raise ValueError("entry ids listed twice")
        for entry in value:
            if entry.validation is None or not entry.validation.passed:
                raise ValueError(f"entry {entry.entry_id} is not validated (every replay must pass)")
        return tuple(sorted(value, key=lambda e: e.entry_id))

    def to_json(self) -> str:
        """The canonical JSON text (what the snapshot id hashes)."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, indent=1, ensure_ascii=False) + "\n"

    @property
    def snapshot_id(self) -> str:
        """sha256 (hex) of :meth:`to_json`."""
        return hashlib.sha256(self.to_json().encode("utf-8")).hexdigest()

    def counts(self) -> dict[str, int]:
        """Entries by provenance: ``{"oracle": n, "model": m}`` (both keys always present)."""
        found = Counter(str(e.provenance) for e in self.entries)
        return {str(p): found.get(str(p), 0) for p in Provenance}

    def with_entries(self, entries: list[ExperienceEntry]) -> ExperienceSnapshot:
        """A new snapshot with ``entries`` added (an entry already present is kept once)."""
        have = {e.entry_id for e in self.entries}
        return ExperienceSnapshot(entries=(*self.entries, *(e for e in entries if e.entry_id not in have)))


def load_snapshot(text: str, source: str = "<snapshot>") -> ExperienceSnapshot:
    """Parse a snapshot document.

    Raises:
        InputError: not JSON, or not a valid snapshot (naming ``source`` and the field).
    """
    try:
        return ExperienceSnapshot.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise InputError(source, field, first["msg"]) from None
