"""The experience library in the report: its size by provenance, what each round added, rejections.

Two sources, both from the store: the library itself (``experience_entries``, counted by
provenance; ``experience_rejections``, counted by reason per generation) and each
generation record's ``experience`` entry, the reports ``grow_experience`` wrote per round
(``oracle``, ``model``). :func:`round_rows` reads the records alone (pure); the report's
JSON carries both under ``experience``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, computed_field

from mindforge.experience.entry import Provenance
from mindforge.experience.validation import RejectionReason
from mindforge.payloads.experience import GrowExperienceResult

#: the order rounds run in within one generation
ROUND_ORDER = ("oracle", "model")
#: the report table's columns
HEADER = ["generation", "round", "candidates", "replayed", "added (oracle/model)", "rejected by reason",
          "library after (oracle/model)"]


class GrowthRow(GrowExperienceResult):
    """One growth round as the generation record holds it: the round's result and its generation.

    Attributes:
        generation: the generation (the other fields as :class:`GrowExperienceResult`).
    """

    generation: int


class ExperienceReport(BaseModel):
    """The lineage's experience library (the report JSON's ``experience``).

    Attributes:
        entries: stored entries by provenance (``oracle``, ``model``); ``size`` is their sum.
        rounds: every round recorded, generation then round order.
        rejections: generation -> rejections by reason (every reason a key), from the store.
    """

    entries: dict[str, int] = Field(default_factory=lambda: {str(p): 0 for p in Provenance})
    rounds: list[GrowthRow] = Field(default_factory=list)
    rejections: dict[int, dict[str, int]] = Field(default_factory=dict)

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented use on a property
    @property
    def size(self) -> int:
        """Entries in the library (in the JSON too)."""
        return sum(self.entries.values())


def round_rows(records: list[tuple[int, dict[str, Any]]]) -> list[GrowthRow]:
    """The rounds recorded in generation records.

    Args:
        records: (generation index, generation record) pairs, any order.

    Returns:
        one row per recorded round, by generation then :data:`ROUND_ORDER`; a record
        without ``experience`` (or with something else there) gives none.
    """
    rows: list[GrowthRow] = []
    for index, record in sorted(records, key=lambda item: item[0]):
        rounds = record.get("experience")
        if not isinstance(rounds, dict):
            continue
        for name in sorted(rounds, key=lambda r: (ROUND_ORDER.index(r) if r in ROUND_ORDER else len(ROUND_ORDER), r)):
            report = rounds[name]
            if isinstance(report, dict):
                fields = {k: v for k, v in report.items() if k in GrowthRow.model_fields and k != "round"}
                rows.append(GrowthRow(generation=index, round=name, **fields))
    return rows


def _split(counts: dict[str, int]) -> str:
    return "/".join(str(counts.get(str(p), 0)) for p in Provenance)


def table_cells(row: GrowthRow) -> list[str]:
    """One round as the report table's cells (:data:`HEADER`)."""
    reasons = ", ".join(f"{r} {row.rejected[str(r)]}" for r in RejectionReason if row.rejected.get(str(r)))
    capped = f" (+{row.capped} capped)" if row.capped else ""
    return [str(row.generation), row.round, f"{row.candidates}{capped}", str(row.replayed), _split(row.added),
            reasons or "-", _split(row.entries)]


def summary_text(report: ExperienceReport) -> str:
    """One line: the library's size by provenance (what ``lineage status`` prints too)."""
    oracle, model = report.entries.get("oracle", 0), report.entries.get("model", 0)
    return f"experience library: {report.size} entries ({oracle} oracle, {model} model)"
