"""A lineage's sealed readings for the report and the CLI: one table per reading, the readings record, the curriculum.

The sealed split is read apart by provenance, never pooled
(:mod:`mindforge.evaluation.curriculum`): *sealed instances* (in distribution; with its
copyable and needs-adaptation parts), *sealed families* (out-of-family transfer), *sealed
tasks* (pinned hand-written tasks nothing in the lineage restates: transfer to a
human-written set), *restated tasks* (pinned tasks that share a solution shape with the
library) and *dealt tasks* (hand-written tasks dealt to sealed by fraction). Every
headline names the first three, figure or not (:func:`headline_lines`). This module
gathers, from the store alone:

- :func:`readings_summary`: the lineage's readings as last checked (``Lineage.spec["readings"]``:
  training and held-out families, sealed tasks per reading and their provenance, copyable /
  needs adaptation, each restated task with what restates it and the check that moved it);
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
    HEADLINE_READINGS,
    READING_NAMES,
    READING_ORDER,
    READING_TITLES,
    ReadingsRecord,
    SealedReading,
)
from mindforge.reports.compounding import (
    CompoundingRow,
    compounding_rows,
    families_text,
    is_legacy,
    lift_text,
    method_text,
    reading_record,
    record_readings,
)

#: why a lineage has no table for a reading, in words
ABSENT = {
    SealedReading.INSTANCES.value: "it draws no task families, so no unseen instance of a training family is sealed",
    SealedReading.FAMILIES.value: "it holds out no task family",
    SealedReading.TASKS.value: "it pins no hand-written task to the sealed split that nothing in it restates",
    SealedReading.RESTATED.value: "nothing it mined restates a pinned sealed task",
    SealedReading.DEALT.value: "it deals no hand-written task to the sealed split by fraction",
}


def reading_title(reading: str) -> str:
    """The reading's heading (:data:`READING_TITLES`), e.g. ``sealed families (families the lineage never sees...)``."""
    return READING_TITLES[SealedReading(reading)]


def reading_name(reading: str | None) -> str:
    """The reading's short name: ``sealed instances``, ``sealed families``, ``sealed tasks``, ... (``-`` for None)."""
    if not reading:
        return "-"
    return READING_NAMES[SealedReading(reading)] if reading in SealedReading._value2member_map_ else reading


class ReadingsSummary(BaseModel):
    """What a lineage recorded at start about its sealed readings.

    Attributes:
        recorded: False for a lineage started before readings existed (its whole sealed
            split is read as *sealed tasks*).
        training_families / sealed_families: families searched and trained on / held out whole.
        tasks: reading -> sealed tasks of that reading (every reading, possibly 0).
        families: reading -> families its tasks come from (the family readings only).
        copyable / needs_adaptation: the two parts of the sealed-instances reading, in tasks.
        origins: provenance (``pinned``, ``dealt``, ``family_instance``, ``held_out_family``)
            -> sealed tasks (empty for a lineage that recorded none).
        restated: each restated task's id -> what restates it, with the check that moved it.
        checks: how many times the labels were checked, and the last check.
    """

    recorded: bool = False
    training_families: list[str] = Field(default_factory=list)
    sealed_families: list[str] = Field(default_factory=list)
    tasks: dict[str, int] = Field(default_factory=dict)
    families: dict[str, int] = Field(default_factory=dict)
    copyable: int = 0
    needs_adaptation: int = 0
    origins: dict[str, int] = Field(default_factory=dict)
    restated: dict[str, str] = Field(default_factory=dict)
    checks: str = ""

    def header(self) -> str:
        """One line: the headline readings (absent ones say so), then any other reading with tasks."""
        parts = []
        for reading in READING_ORDER:
            n = self.tasks.get(reading.value, 0)
            if not n:
                if reading in HEADLINE_READINGS and (self.recorded or reading != SealedReading.TASKS):
                    parts.append(f"{reading_name(reading.value)}: none ({ABSENT[reading.value]})")
                continue
            text = f"{reading_name(reading.value)} {n} tasks"
            if reading == SealedReading.INSTANCES:
                families = ", ".join(self.training_families) or "-"
                text += (
                    f" in {families_text(self.families.get(reading.value, 0))} (copyable {self.copyable}, "
                    f"needs adaptation {self.needs_adaptation}; of {families})"
                )
            if reading == SealedReading.FAMILIES:
                held_out = ", ".join(self.sealed_families) or "-"
                text += f" in {families_text(self.families.get(reading.value, 0))} (held out: {held_out})"
            if reading == SealedReading.RESTATED:
                text += f" ({self.restated_text()})"
            parts.append(text)
        if not any(self.tasks.values()):
            return "sealed readings: none (the lineage has no sealed task)"
        recorded = "" if self.recorded else " (started before readings were recorded: its sealed split is read whole)"
        return "sealed readings, never pooled: " + "; ".join(parts) + recorded

    def restated_text(self) -> str:
        """``make-directory: search task json-field-lines (reference solution) [lineage start]; ...`` (``-``: none)."""
        return "; ".join(f"{task}: {why}" for task, why in sorted(self.restated.items())) or "-"


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
    restated = {}
    for task_hash, by in record.restated.items():
        if task_hash in record.tasks_of(SealedReading.RESTATED):
            shown = ", ".join(by[:3]) + (f" and {len(by) - 3} more" if len(by) > 3 else "")
            when = record.moved_at.get(task_hash)
            restated[record.task_ids.get(task_hash, task_hash[:12])] = shown + (f" [{when}]" if when else "")
    families = {
        r.value: len({record.family_of[h] for h in record.tasks_of(r) if h in record.family_of})
        for r in (SealedReading.INSTANCES, SealedReading.FAMILIES)
    }
    return ReadingsSummary(
        recorded=True,
        training_families=list(record.training_families),
        sealed_families=list(record.sealed_families),
        tasks={r.value: len(record.tasks_of(r)) for r in READING_ORDER},
        families=families,
        copyable=len(parts["copyable"]),
        needs_adaptation=len(parts["needs_adaptation"]),
        origins=dict(Counter(str(o) for o in record.origins.values())),
        restated=restated,
        checks=f"{len(record.checks)} checks, the last: {record.checks[-1]}" if record.checks else "",
    )


class ReadingTable(BaseModel):
    """One sealed reading of a lineage: what it measures, on which tasks, and every pair's row.

    Attributes:
        reading: ``instances``, ``families`` or ``tasks``.
        title: what it measures, in words (:data:`READING_TITLES`).
        n_tasks: its sealed tasks (from the readings record, else from the figures).
        n_families: the families its tasks come from (the family readings; 0 otherwise).
        families: the families it reads (training families for ``instances``, held-out
            ones for ``families``; none for ``tasks``).
        before_readings: generations whose figure was recorded before readings existed
            (``record["compounding"]``: the whole sealed split, read here as *sealed tasks*).
        rows: pair 0 first (:class:`mindforge.reports.compounding.CompoundingRow`).
    """

    reading: str
    title: str
    n_tasks: int = 0
    n_families: int = 0
    families: list[str] = Field(default_factory=list)
    before_readings: list[int] = Field(default_factory=list)
    rows: list[CompoundingRow] = Field(default_factory=list)

    @property
    def measured(self) -> bool:
        """True when some pair has a sealed figure on this reading."""
        return any(r.sealed for r in self.rows)

    def header(self) -> str:
        """``<title>: N tasks in F families (...)``: the line a reading's block or table starts with."""
        extra = ""
        if self.reading == SealedReading.INSTANCES.value and self.families:
            extra = f" in {families_text(self.n_families)}; training families {', '.join(self.families)}"
        elif self.reading == SealedReading.FAMILIES.value:
            extra = f" in {families_text(self.n_families)}; held out: {', '.join(self.families) or '-'}"
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
            n_families=summary.families.get(reading, 0),
            before_readings=[g.index for g in generations if is_legacy(g.record)] if reading == "tasks" else [],
            rows=compounding_rows(
                generations, reading=reading, contract_edit=contract_edit, library_entries=library_entries
            ),
        )
    return out


def reading_headline(table: ReadingTable) -> str:
    """One reading's headline: the last measured pair's lift over pair 0, its tasks, units and method (or why none)."""
    measured = [r for r in table.rows if r.sealed and r.pair and not r.kept]
    if not measured:
        return "no pair after the root measured yet"
    last = measured[-1]
    digests = {r.sealed_tasks_sha256 for r in table.rows if r.sealed_tasks_sha256}
    same = "; every generation read the same tasks" if len(digests) == 1 else (
        f"; the task set differs between generations ({len(digests)} sets): the figures do not compare"
        if digests else ""
    )
    lift = lift_text(last.lift_vs_root, last.lift_vs_root_reason)
    method = method_text(last.lift_vs_root)
    return f"pair {last.pair} over pair 0 {lift}{'; ' + method if method else ''}{same}"


def headline_lines(tables: dict[str, ReadingTable], summary: ReadingsSummary | None = None) -> list[str]:
    """Every headline's readings: one line each for the three headline readings (figure, or why none), then the others.

    Never one reading alone: *sealed instances* (in distribution), *sealed families* and
    *sealed tasks* (transfer) are always named; *restated tasks* and *dealt tasks* when the
    lineage has them (restated tasks with what restates them).

    Args:
        tables: reading -> its table (:func:`reading_tables`).
        summary: the lineage's readings (names the restated tasks), or None.

    Returns:
        ``<reading name>: <headline>`` lines, in :data:`READING_ORDER`.
    """
    lines = []
    for reading in READING_ORDER:
        table = tables.get(reading.value)
        if table is None:
            if reading in HEADLINE_READINGS:
                lines.append(f"{reading_name(reading.value)}: none ({ABSENT[reading.value]})")
            continue
        line = f"{reading_name(reading.value)}: {reading_headline(table)}"
        if reading == SealedReading.RESTATED and summary is not None and summary.restated:
            line += f"; restated by: {summary.restated_text()}"
        lines.append(line)
    return lines


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
