"""The main job's last screen: one short table per generation and one per sealed reading.

``mindforge quickstart`` ends with these two tables and the links; the long account of
each generation (search coverage, the successor's rule, every Update iteration) is
``mindforge lineage status NAME --verbose`` and the HTML report. The figures are the
ones ``lineage status`` and the report show (:mod:`mindforge.reports.readings`), cut to
what a reader checks first: per generation, what the successor decision and the Update
did and how long it took; per sealed reading and pair, its success with counts, its
lift over the root with the 95% interval, task count (and families, for the family
readings) and the harness and weights parts of that pair's change. The three headline
readings - sealed instances, sealed families, sealed tasks - are always rows: one the
lineage does not have says why, so the in-distribution reading never stands alone.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

#: the generations table's columns
GENERATION_COLUMNS = ("gen", "took", "successor (decided on selection)", "Update")
#: the sealed readings table's columns
READING_COLUMNS = (
    "reading", "pair", "sealed success (passed/trials)", "lift vs root (95% CI by unit, tasks)", "harness part",
    "weights part",
)


def generation_row(index: int, seconds: float | None, record: dict[str, Any]) -> list[str]:
    """One generation's cells (:data:`GENERATION_COLUMNS`) from its stored record.

    Args:
        index: the generation's index.
        seconds: its wall time in seconds (None while it runs).
        record: the generation record (``successor`` and ``update`` sections are read).

    Returns:
        four strings; a section the generation did not record reads ``-``.
    """
    succ = record.get("successor") or {}
    if succ:
        lift = succ.get("lift") or []  # [mean, lo, hi] of the selection lift over the parent
        figure = ""
        if len(lift) == 3:
            figure = f" {lift[0]:+.3f} [{lift[1]:+.3f}, {lift[2]:+.3f}], {succ.get('n_tasks', 0)} tasks"
        verdict = "promoted" if succ.get("promoted") else "kept the parent"
        if succ.get("cannot_compare"):
            verdict = "cannot compare: kept the parent"
        successor = verdict + figure
    else:
        successor = "-"
    upd = record.get("update") or {}
    update = str(upd.get("outcome") or "-")
    iterations = upd.get("iterations") or []
    if iterations:
        trained = sum(1 for it in iterations if it.get("steps"))
        guided = sum(int(it.get("guided_groups") or 0) for it in iterations)
        guides = f", {guided} guided groups" if guided else ""
        update += f" ({len(iterations)} iterations, {trained} trained{guides})"
    took = "-" if seconds is None else f"{seconds:.0f} s"
    parts = stage_times(record)
    if parts:
        took += f" ({parts})"
    return [str(index), took, successor, update]


#: how each part of a generation (``GenerationResult.stage_sec``) is named on the screen
STAGE_NAMES = {
    "discovery": "discovery", "expansion.base": "base eval", "expansion.search": "search",
    "expansion.race": "race", "update": "update", "sealed": "sealed",
}


def stage_times(record: dict[str, Any]) -> str:
    """A generation's wall time by part, e.g. ``discovery 12, base eval 40, ... sealed 55 s`` (``""``: none)."""
    stage_sec = record.get("stage_sec") or {}
    parts = [f"{STAGE_NAMES.get(k, k)} {v:.0f}" for k, v in stage_sec.items()]
    return ", ".join(parts) + " s" if parts else ""


def reading_rows(table: Any) -> list[list[str]]:
    """One sealed reading's rows (:data:`READING_COLUMNS`), pair 0 first; a kept pair is marked re-read, no figures.

    Args:
        table: a :class:`mindforge.reports.readings.ReadingTable`.
    """
    from mindforge.reports.compounding import families_text, lift_text, score_text
    from mindforge.reports.readings import reading_name

    units = f" in {families_text(table.n_families)}" if table.n_families else ""
    if not table.rows:
        return [[f"{reading_name(table.reading)} ({table.n_tasks} tasks{units})", "-", "not measured yet", "-", "-",
                 "-"]]
    rows = []
    for row in table.rows:
        name = f"{reading_name(table.reading)} ({table.n_tasks} tasks{units})" if row.pair == 0 else ""
        if row.kept:
            rows.append([name, str(row.pair), f"= pair {row.pair - 1} (kept; re-read)", "-", "-", "-"])
        elif row.pair == 0:
            rows.append([name, "0 (root)", score_text(row.sealed, compact=True), "-", "-", "-"])
        else:
            rows.append([
                name, str(row.pair), score_text(row.sealed, compact=True),
                lift_text(row.lift_vs_root, row.lift_vs_root_reason),
                _part(row.attribution.get("harness")), _part(row.attribution.get("weights")),
            ])
    return rows


def _part(part: dict | None) -> str:
    """A part's lift, or ``unchanged`` / ``not run`` without the reason (the verbose status has it)."""
    from mindforge.reports.compounding import lift_text

    if not part:
        return "-"
    if part.get("status") == "measured":
        return lift_text(part.get("lift"))
    return "unchanged" if part.get("status") == "unchanged" else "not run"


def last_screen(session: Any, lineage_id: str) -> list[Any]:
    """The two tables of a lineage's last screen, read from the store.

    Args:
        session: an open store session.
        lineage_id: the lineage.

    Returns:
        ``[generations table, sealed readings table]`` (Rich tables); the readings table
        says so in a row when the lineage has no sealed reading yet.
    """
    from mindforge.reports import compounding
    from mindforge.reports.readings import reading_tables, readings_summary
    from mindforge.store import PoolSplit, lineages, pool

    lin = lineages.get_lineage(session=session, lineage_id=lineage_id)
    gens = lineages.list_generations(session=session, lineage_id=lineage_id)
    generations = Table(title=f"lineage {lineage_id}: {lin.status if lin else '?'}")
    for col in GENERATION_COLUMNS:
        generations.add_column(col)
    for g in gens:
        seconds = (g.finished_at - g.started_at).total_seconds() if g.finished_at and g.started_at else None
        generations.add_row(*generation_row(g.index, seconds, g.record or {}))
    sealed = len(pool.list_pool(session=session, lineage_id=lineage_id, split=PoolSplit.SEALED))
    summary = readings_summary((lin.spec if lin else None) or {}, sealed)
    tables = reading_tables(
        gens, summary, contract_edit=lambda old, new: compounding.edits_between(session, old, new),
        library_entries=lambda h: compounding.library_entries(session, h),
    )
    readings = Table(title="sealed readings, never pooled (pair k: the pair generation k starts from)")
    for col in READING_COLUMNS:
        readings.add_column(col)
    for cells in readings_rows(tables):
        readings.add_row(*cells)
    return [generations, readings]


def readings_rows(tables: dict[str, Any]) -> list[list[str]]:
    """Every reading's rows in reading order; a headline reading the lineage does not have is one row saying why.

    Args:
        tables: reading -> :class:`mindforge.reports.readings.ReadingTable`.
    """
    from mindforge.evaluation.curriculum import HEADLINE_READINGS, READING_ORDER
    from mindforge.reports.readings import ABSENT, reading_name

    rows = []
    for reading in READING_ORDER:
        table = tables.get(reading.value)
        if table is not None:
            rows += reading_rows(table)
        elif reading in HEADLINE_READINGS:
            rows.append([reading_name(reading.value), "-", f"none: {ABSENT[reading.value]}", "-", "-", "-"])
    return rows
