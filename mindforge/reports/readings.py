"""A lineage's sealed readings for the report and the CLI: one table per reading, the readings record, the curriculum.

The sealed split is read three ways, never pooled (:mod:`mindforge.evaluation.curriculum`):
*sealed instances* (in distribution; with its copyable and needs-adaptation parts),
*sealed families* (out-of-family transfer) and *sealed tasks* (hand-written tasks). This
module gathers, from the store alone:

- :func:`readings_summary`: what the lineage recorded at start (``Lineage.spec["readings"]``:
  training and held-out families, sealed tasks per reading, copyable / needs adaptation);
  a lineage started before readings existed reads its whole sealed split as *sealed tasks*;
- :func:`reading_tables`: one :class:`ReadingTable` per reading the lineage has (tasks
  recorded, or figures in some generation), in :data:`READING_ORDER`, each holding the
  compounding rows of that reading (:func:`mindforge.reports.compounding.compounding_rows`);
- :func:`curriculum_summary`: for a lineage drawn from task families, the families drawn
  and held out, the instances per split, and what the preparation validated, read from its
  cache, rejected (with reasons) and warned about (``Lineage.spec["curriculum"]`` and
  ``Lineage.spec["curriculum_prep"]``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from pydantic import BaseModel, Field

from mindforge.evaluation.curriculum import (
    READING_ORDER,
    READING_TITLES,
    ReadingsRecord,
    SealedReading,
)
from mindforge.reports.compounding import (
    CompoundingRow,
    compounding_rows,
    is_legacy,
    reading_record,
    record_readings,
)

#: why a lineage has no table for a reading, in words
ABSENT = {
    SealedReading.INSTANCES.value: "it draws no task families, so no unseen instance of a training family is sealed",
    SealedReading.FAMILIES.value: "it holds out no task family",
    SealedReading.TASKS.value: "it has no hand-written task on the sealed split",
}


def reading_title(reading: str) -> str:
    """The reading's heading (:data:`READING_TITLES`), e.g. ``sealed families (families the lineage never sees...)``."""
    return READING_TITLES[SealedReading(reading)]


def reading_name(reading: str | None) -> str:
    """The reading's short name: ``sealed instances``, ``sealed families``, ``sealed tasks`` (``-`` for None)."""
    return f"sealed {reading}" if reading else "-"


class ReadingsSummary(BaseModel):
    """What a lineage recorded at start about its sealed readings.

    Attributes:
        recorded: False for a lineage started before readings existed (its whole sealed
            split is read as *sealed tasks*).
        training_families / sealed_families: families searched and trained on / held out whole.
        tasks: reading -> sealed tasks of that reading (every reading, possibly 0).
        copyable / needs_adaptation: the two parts of the sealed-instances reading, in tasks.
    """

    recorded: bool = False
    training_families: list[str] = Field(default_factory=list)
    sealed_families: list[str] = Field(default_factory=list)
    tasks: dict[str, int] = Field(default_factory=dict)
    copyable: int = 0
    needs_adaptation: int = 0

    def header(self) -> str:
        """One line: each reading with tasks, its task count, the held-out families and the copyable split."""
        parts = []
        for reading in READING_ORDER:
            n = self.tasks.get(reading.value, 0)
            if not n:
                continue
            text = f"{reading_name(reading.value)} {n} tasks"
            if reading == SealedReading.INSTANCES and n:
                families = ", ".join(self.training_families) or "-"
                text += f" (copyable {self.copyable}, needs adaptation {self.needs_adaptation}; of {families})"
            if reading == SealedReading.FAMILIES and n:
                text += f" (held out: {', '.join(self.sealed_families) or '-'})"
            parts.append(text)
        if not parts:
            return "sealed readings: none (the lineage has no sealed task)"
        recorded = "" if self.recorded else " (started before readings were recorded: its sealed split is read whole)"
        return "sealed readings, never pooled: " + "; ".join(parts) + recorded


def readings_summary(spec: dict[str, Any], sealed_tasks: int) -> ReadingsSummary:
    """The readings record of a lineage spec, summarised.

    Args:
        spec: ``Lineage.spec`` as stored.
        sealed_tasks: the lineage's sealed tasks in the pool (the *sealed tasks* reading of
            a lineage that recorded no readings).
    """
    stored = spec.get("readings")
    if not stored:
        return ReadingsSummary(tasks={r.value: sealed_tasks if r == SealedReading.TASKS else 0 for r in READING_ORDER})
    record = ReadingsRecord.model_validate(stored)
    parts = record.parts_of_instances()
    return ReadingsSummary(
        recorded=True,
        training_families=list(record.training_families),
        sealed_families=list(record.sealed_families),
        tasks={r.value: len(record.tasks_of(r)) for r in READING_ORDER},
        copyable=len(parts["copyable"]),
        needs_adaptation=len(parts["needs_adaptation"]),
    )


class ReadingTable(BaseModel):
    """One sealed reading of a lineage: what it measures, on which tasks, and every pair's row.

    Attributes:
        reading: ``instances``, ``families`` or ``tasks``.
        title: what it measures, in words (:data:`READING_TITLES`).
        n_tasks: its sealed tasks (from the readings record, else from the figures).
        families: the families it reads (training families for ``instances``, held-out
            ones for ``families``; none for ``tasks``).
        before_readings: generations whose figure was recorded before readings existed
            (``record["compounding"]``: the whole sealed split, read here as *sealed tasks*).
        rows: pair 0 first (:class:`mindforge.reports.compounding.CompoundingRow`).
    """

    reading: str
    title: str
    n_tasks: int = 0
    families: list[str] = Field(default_factory=list)
    before_readings: list[int] = Field(default_factory=list)
    rows: list[CompoundingRow] = Field(default_factory=list)

    @property
    def measured(self) -> bool:
        """True when some pair has a sealed figure on this reading."""
        return any(r.sealed for r in self.rows)

    def header(self) -> str:
        """``<title>: N tasks (...)``: the line a reading's block or table starts with."""
        extra = ""
        if self.reading == SealedReading.INSTANCES.value and self.families:
            extra = f"; training families {', '.join(self.families)}"
        elif self.reading == SealedReading.FAMILIES.value:
            extra = f"; held out: {', '.join(self.families) or '-'}"
        return f"{self.title}: {self.n_tasks} tasks{extra}"


def reading_tables(
    generations: list[Any], summary: ReadingsSummary, *, contract_edit=None, library_entries=None
) -> dict[str, ReadingTable]:
    """Reading -> its table, for each reading with tasks recorded or figures in some generation.

    Args:
        generations: the lineage's stored generations.
        summary: :func:`readings_summary` of the lineage.
        contract_edit / library_entries: as :func:`mindforge.reports.compounding.compounding_rows`.

    Returns:
        in :data:`READING_ORDER`; empty when the lineage has no sealed task and no figure.
    """
    measured = {r for g in generations for r in record_readings(g.record)}
    families = {
        SealedReading.INSTANCES.value: summary.training_families,
        SealedReading.FAMILIES.value: summary.sealed_families,
    }
    out = {}
    for reading in (r.value for r in READING_ORDER):
        if not summary.tasks.get(reading) and reading not in measured:
            continue
        figured = [reading_record(g.record, reading) for g in generations]
        n_tasks = summary.tasks.get(reading) or max((len(f.get("sealed_tasks") or []) for f in figured), default=0)
        out[reading] = ReadingTable(
            reading=reading, title=reading_title(reading), n_tasks=n_tasks, families=list(families.get(reading, [])),
            before_readings=[g.index for g in generations if is_legacy(g.record)] if reading == "tasks" else [],
            rows=compounding_rows(
                generations, reading=reading, contract_edit=contract_edit, library_entries=library_entries
            ),
        )
    return out


class CurriculumSummary(BaseModel):
    """A lineage drawn from task families: what was drawn, held out, placed, validated and rejected.

    Attributes:
        families_dir: the folder of families.
        families / training_families / sealed_families: drawn from / searched and trained
            on / held out whole (every instance sealed).
        instances / selection_instances / sealed_fraction / seed: as asked (``CurriculumSpec``).
        per_family: family -> split (``search``, ``selection``, ``sealed``) -> instances in the pool.
        validated / cached: instances validated at start / whose verdict came from the cache.
        rejected: ``"<instance>: <verdict>: <reason>"`` per instance set aside.
        rejected_by_verdict: verdict -> instances set aside.
        warnings: families that admit fewer instances than asked, and the like.
        images: the family images the instances start from.
        seconds: wall time of the preparation.
    """

    families_dir: str = ""
    families: list[str] = Field(default_factory=list)
    training_families: list[str] = Field(default_factory=list)
    sealed_families: list[str] = Field(default_factory=list)
    instances: int = 0
    selection_instances: int = 0
    sealed_fraction: float = 0.0
    seed: int = 0
    per_family: dict[str, dict[str, int]] = Field(default_factory=dict)
    validated: int = 0
    cached: int = 0
    rejected: list[str] = Field(default_factory=list)
    rejected_by_verdict: dict[str, int] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    images: list[str] = Field(default_factory=list)
    seconds: float = 0.0


def curriculum_summary(spec: dict[str, Any], split_of: dict[str, str]) -> CurriculumSummary | None:
    """The curriculum of a lineage spec (None: the lineage draws no families).

    Args:
        spec: ``Lineage.spec`` as stored (``curriculum``, ``curriculum_prep``, ``readings``).
        split_of: task content hash -> split of the lineage's pool (``search``, ``selection``, ``sealed``).
    """
    curriculum = spec.get("curriculum")
    if not curriculum:
        return None
    prep = spec.get("curriculum_prep") or {}
    family_of = (spec.get("readings") or {}).get("family_of") or {}
    per_family: dict[str, dict[str, int]] = defaultdict(lambda: {"search": 0, "selection": 0, "sealed": 0})
    for task_hash, family in sorted(family_of.items()):
        if (split := split_of.get(task_hash)) is not None:
            per_family[family][split] = per_family[family].get(split, 0) + 1
    rejected = [str(r) for r in prep.get("rejected") or []]
    verdicts = Counter(r.split(": ")[1] if r.count(": ") >= 2 else "rejected" for r in rejected)
    held_out = list(curriculum.get("sealed_families") or [])
    families = list(curriculum.get("families") or [])
    return CurriculumSummary(
        families_dir=str(curriculum.get("families_dir", "")), families=families,
        training_families=sorted(set(families) - set(held_out)), sealed_families=held_out,
        instances=int(curriculum.get("instances", 0)),
        selection_instances=int(curriculum.get("selection_instances", 0)),
        sealed_fraction=float(curriculum.get("sealed_fraction", 0.0)), seed=int(curriculum.get("seed", 0)),
        per_family={f: per_family[f] for f in sorted(per_family)},
        validated=int(prep.get("validated", 0)), cached=int(prep.get("cached", 0)),
        rejected=rejected, rejected_by_verdict=dict(sorted(verdicts.items())),
        warnings=[str(w) for w in prep.get("warnings") or []], images=[str(i) for i in prep.get("images") or []],
        seconds=float(prep.get("seconds", 0.0)),
    )
