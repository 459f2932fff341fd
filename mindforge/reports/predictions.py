"""The report's section on edit predictions: what each search edit said it would change, and the verdict.

Each generation's search record (``record["search"]["predictions"]``, written by
:func:`mindforge.search.summary.search_summary`) lists every candidate's prediction - the
failing tasks it would turn into passes, by audit cluster, and the pass rate it claimed
there - with the verdict its own trials gave: confirmed, refuted or untested
(:mod:`mindforge.search.predictions`). The section shows them beside the failure audit.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from mindforge.reports.blocks import Section
from mindforge.reports.data import ReportData

#: rows shown per generation (refuted and confirmed first)
ROWS_SHOWN = 40
_ORDER = {"refuted": 0, "confirmed": 1, "untested": 2}


def _edit(row: dict[str, Any]) -> str:
    return " + ".join(row.get("edits") or ["?"])


def _names(row: dict[str, Any]) -> str:
    classes = list(row.get("classes") or [])
    if classes == ["*"]:
        return f"every failing task ({row.get('tasks', 0)})"
    return f"{', '.join(classes)} ({row.get('tasks', 0)} tasks)"


def predictions_section(data: ReportData) -> Section:
    """Section ``edit-predictions``: each generation's edit predictions and their verdicts."""
    s = Section(id="edit-predictions", title="Edit predictions and verdicts")
    rows: list[list[Any]] = []
    counts: Counter[str] = Counter()
    for generation in data.generations:
        stated = (generation.get("record", {}).get("search") or {}).get("predictions") or []
        counts.update(str(p.get("verdict", "untested")) for p in stated)
        shown = sorted(stated, key=lambda p: (_ORDER.get(str(p.get("verdict")), 3), -int(p.get("trials", 0))))
        rows += [
            [
                generation["index"], _edit(p), _names(p), f"{float(p.get('min_rate', 0)):.2f}",
                p.get("trials", 0), p.get("passes", 0), p.get("verdict", "untested"),
            ]
            for p in shown[:ROWS_SHOWN]
        ]  # fmt: skip
    if not rows:
        return s.text("No search recorded edit predictions yet.")
    s.text(
        "Every edit the search tried stated which failing tasks it would turn into passes and at what rate "
        "(from the audit; a general lift over every failing task for the lineage's library and the edits the "
        "audit does not point at). Its own trials on those tasks decide: confirmed once one passed, refuted "
        "once that many failures in a row are too unlikely at the claimed rate, untested until then. A "
        "refuted edit is not offered again in that search. "
        f"In all: {counts['confirmed']} confirmed, {counts['refuted']} refuted, {counts['untested']} untested."
    )
    return s.table(
        ["generation", "edit", "predicts passes on", "claimed rate", "trials there", "passes", "verdict"], rows
    )
