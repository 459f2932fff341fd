"""What a lineage's generations found, as plain lines: each figure under its own name.

``mindforge quickstart`` prints these after the lineage ends, then the compounding
tables: every pair on each sealed reading (sealed instances, sealed families, sealed
tasks), one block per reading, never pooled. The kinds of evidence stay apart (docs/design.md,
"Three splits"): the base evaluation and the search-set coverage (search split; coverage
is an upper bound across contracts, not skill), the decisions (selection split), and the
sealed figures with their intervals and counts, each under its reading's name.
Everything comes from :func:`mindforge.reports.gather_report_data`, the report's own numbers.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from mindforge.evaluation.curriculum import HEADLINE_READINGS, READING_ORDER, SealedReading
from mindforge.evaluation.sizing import GatesAtRate
from mindforge.reports import ReportData, gather_report_data
from mindforge.reports.compounding import (
    PART_TITLES,
    PARTS,
    CompoundingRow,
    kept_text,
    lift_text,
    part_text,
    score_text,
)
from mindforge.reports.readings import ReadingTable, reading_name
from mindforge.reports.sections import sealed_text


def _rate(part: int, whole: int) -> str:
    return f"{part}/{whole}" + (f" ({100 * part / whole:.0f}%)" if whole else "")


def _discovery(record: Any) -> str | None:
    if not isinstance(record, dict):
        return None
    reasons: dict[str, int] = {}
    for r in record.get("rejected", []):
        reasons[r.get("reason", "?")] = reasons.get(r.get("reason", "?"), 0) + 1
    why = ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())) or "-"
    return (
        f"  Discovery: asked for {record.get('requested', 0)}, the reply held {record.get('proposed', 0)} item(s), "
        f"admitted {len(record.get('admitted', []))}; rejected by reason: {why} (a reply that cannot be read as a list "
        "counts once as malformed)"
    )


def _base(data: ReportData, index: int) -> list[str]:
    cov = next((c for c in data.coverage if c.index == index), None)
    if cov is None:
        return ["  base evaluation: no model trials on the search split"]
    base = cov.matrix
    wins = sum(cells.get(cov.base_contract or "", [0, 0, 0])[0] for cells in base.values())
    usable = sum(cells.get(cov.base_contract or "", [0, 0, 0])[1] for cells in base.values())
    best = data.contract_ref(cov.failing_single_contract)
    edit = data.contract_edit(cov.failing_single_contract) or "-"
    return [
        f"  base contract {data.contract_ref(cov.base_contract)}: solved {_rate(cov.base_solved, cov.summary.tasks)} "
        f"search tasks; {_rate(wins, usable)} of its trials passed",
        f"  search-set coverage of the {cov.failing} tasks it failed: adaptive search {cov.failing_covered} "
        f"(cumulative), best candidate within the adaptive run (not a sweep) {cov.failing_single} ({best}: {edit}); "
        "an upper bound on the searched "
        "tasks, not skill",
    ]


def _decisions(data: ReportData, decisions: list[dict[str, Any]]) -> list[str]:
    from mindforge.reports.compounding import reused_text

    out = []
    for d in decisions:
        if d["kind"] == "successor_contract":
            verb = "cannot compare; kept" if d.get("cannot_compare") else "promoted" if d.get("promoted") else "kept"
            out.append(
                f"  successor contract (decided on {d.get('decided_on')}, {len(d.get('trial_ids') or [])} trials): "
                f"{verb} {data.contract_ref(d.get('contract_hash'))} - {d.get('reason', '')}"
            )
        else:
            verb = "cannot compare" if d.get("cannot_compare") else "promoted" if d.get("promoted") else "not promoted"
            out.append(
                f"  adapter promotion (decided on {d.get('decided_on')}, {len(d.get('trial_ids') or [])} trials): "
                f"{verb} - {d.get('reason', '')}"
            )
        if d.get("rule"):
            out.append(f"    rule: {d['rule']}")
        if d.get("reused"):
            out.append(f"    {reused_text(d['reused']).removeprefix('; ')} (read, not run again)")
        race = d.get("race") or {}
        if race.get("full_trials"):
            early = ", stopped once settled" if race.get("stopped_early") else ""
            settled = ", ".join(f"{data.contract_ref(c)} {s}" for c, s in (race.get("settled") or {}).items())
            out.append(
                f"    race: {race.get('run_trials')} of the full race's {race.get('full_trials')} trials stored"
                f"{early}; candidates: {settled or '-'}"
            )
    return out


def _update(record: dict[str, Any]) -> list[str]:
    update = record.get("update") or {}
    if not update:
        return []
    sel = update.get("selection") or {}
    lines = [
        f"  Update: {update.get('outcome', '?')}; selection kept {sel.get('kept_groups', 0)} group(s), "
        f"{sel.get('kept_trials', 0)} trials with contrast"
        + (f" ({update['reason']})" if update.get("reason") else "")
    ]
    adapter = update.get("adapter")
    if adapter:
        training = update.get("training") or {}
        handoff = ", ".join(h.get("load", "?") for h in update.get("handoff") or []) or "-"
        lines.append(
            f"  adapter {adapter.get('name')} (rank {adapter.get('rank')}): trained on {adapter.get('trials')} trials "
            f"in {training.get('steps', '?')} steps, "
            f"validated (max |logit diff| {adapter.get('max_abs_logit_diff', 0):.3g}), "
            f"registered, hand-off: {handoff}"
        )
    if update.get("validation"):
        lines.append(f"  validation rejected it: {update['validation'].get('message', '')}")
    return lines


def compounding_lines(data: ReportData) -> list[str]:
    """The compounding tables as plain lines: one block per sealed reading, one entry per pair k.

    Each block is titled with the reading's title (:data:`mindforge.evaluation.curriculum.READING_TITLES`)
    and its task count. Each pair gets its sealed success on the reading (score, passed
    trials, tasks) and, after the root, a line with its paired lift over pair k-1 and over
    pair 0 (``+mean [lo, hi] n=tasks``: 95% bootstrap interval and paired tasks, or the
    reason there is no figure), pair 0's success beside it, and a line with the harness
    and weights parts of the first; under the instances reading, a line per part
    (copyable, needs adaptation: success and lift over pair 0). A pair the generation kept
    is one line, ``= pair k-1 (kept; re-read, not run again)``: the same trials, not a new figure.
    The figures are the report's (:mod:`mindforge.reports.compounding`).

    Args:
        data: the gathered report data of one lineage.

    Returns:
        a heading, then each reading's block; a single line when no pair was measured.
    """
    tables = [t for t in data.readings.values() if t.measured]
    if not tables:
        return ["compounding: no pair measured on the sealed split"]
    lines = [
        "compounding per sealed reading, never pooled (pair k is the pair generation k starts from; lifts paired by "
        "task, 95% CI, n = paired tasks):",
        f"  {data.readings_record.header()}",
    ]
    for table in tables:
        lines += reading_lines(data, table)
    return lines


def reading_lines(data: ReportData, table: ReadingTable) -> list[str]:
    """One reading's block of :func:`compounding_lines`: its title, then each pair's lines."""
    lines = [f"{table.header()}:"]
    if table.before_readings:
        lines.append(
            f"  (generation(s) {', '.join(map(str, table.before_readings))} measured before readings existed: "
            "the whole sealed split, read as sealed tasks)"
        )
    for r in table.rows:
        who = "root" if r.handed_on_by is None else f"handed on by gen {r.handed_on_by}"
        head = f"  pair {r.pair} ({who}, {data.contract_ref(r.contract_hash)} / {r.adapter or 'base'}): "
        if r.kept:
            lines.append(head + kept_text(r))
            continue
        lines.append(head + f"sealed {score_text(r.sealed)}" + (f"; pair 0 {score_text(r.base)}" if r.pair else ""))
        if r.pair:
            lines.append(
                f"    lift vs previous (pair {r.pair - 1}) {lift_text(r.lift_vs_prev, r.lift_vs_prev_reason)}; "
                f"vs root (pair 0) {lift_text(r.lift_vs_root, r.lift_vs_root_reason)}"
            )
            lines.append(
                f"    of the lift vs previous: harness part {part_text(r.attribution.get('harness'))}; "
                f"weights part {part_text(r.attribution.get('weights'))}"
            )
        if table.reading == SealedReading.INSTANCES.value:
            lines += _part_lines(r)
    return lines


def _part_lines(row: CompoundingRow) -> list[str]:
    """The instances reading's copyable / needs-adaptation lines of one pair (none when not measured)."""
    out = []
    for name in PARTS:
        part = row.parts.get(name)
        if not part:
            continue
        text = f"    {PART_TITLES[name]}: sealed {score_text(part.get('sealed'))}"
        if row.pair:
            text += f"; vs pair 0 {lift_text(part.get('lift_vs_root'), part.get('lift_vs_root_reason', ''))}"
        out.append(text)
    return out


def results_lines(session: Session, lineage_id: str) -> list[str]:
    """Each generation's lines (splits, base evaluation, coverage, decisions, Update, sealed lift), then the tables.

    The sealed lift lines are one per reading, each named (the three headline readings
    always); the gates' power at the parent's measured rate follows when the generation
    recorded it; the tables are the compounding tables of :func:`compounding_lines`, one
    per reading.

    Args:
        session: an open store session.
        lineage_id: the lineage's id or name.

    Raises:
        NotFoundError: no such lineage.
    """
    data = gather_report_data(session, lineage_id)
    lines = [f"lineage {data.lineage_name}: {data.status}"]
    if data.split_warnings:
        lines.append("  flagged: " + "; ".join(data.split_warnings))
    for g, ev in zip(data.generations, data.evidence, strict=True):
        splits = ev.splits
        lines.append(
            f"generation {g['index']} ({g['status']}): tasks search {splits.get('search', 0)} / "
            f"selection {splits.get('selection', 0)} / sealed {splits.get('sealed', 0)}"
        )
        if (line := _discovery(data.discovery.get(g["index"]))) is not None:
            lines.append(line)
        lines += _base(data, g["index"])
        lines += _decisions(data, ev.decisions)
        lines += _update(g["record"])
        lines += _sealed_lines(ev)
        if ev.gate_power:
            lines += [f"  {line}" for line in GatesAtRate.model_validate(ev.gate_power).lines()]
    return lines + compounding_lines(data)


def _sealed_lines(ev) -> list[str]:
    """A generation's sealed lift over its parent (and generation 0) on every headline reading, each named."""
    if not ev.sealed_lifts:
        return ["  sealed lift over the parent pair: not measured yet"]
    lines = []
    for reading in READING_ORDER:
        entry = ev.sealed_lifts.get(reading.value)
        name = reading_name(reading.value)
        if entry is None:
            if reading in HEADLINE_READINGS:
                lines.append(f"  sealed lift over the parent pair ({name}): none in this lineage")
            continue
        lines.append(
            f"  sealed lift over the parent pair ({name}): {sealed_text(entry.get('lift'), entry.get('reason', ''))}"
        )
        if entry.get("vs_root"):
            lines.append(f"  sealed lift over generation 0 ({name}): {sealed_text(entry['vs_root'])}")
    return lines
