"""The experience library in the report: rounds read from generation records, the table, the JSON keys."""

from __future__ import annotations

import json

from mindforge.reports import ReportData, render_report
from mindforge.reports.experience import ExperienceReport, round_rows, summary_text, table_cells

ORACLE = {"snapshot_id": "ab" * 32, "entries": {"oracle": 3, "model": 0}, "added": {"oracle": 3, "model": 0},
          "rejected": {"failed": 1, "flaky": 0, "duplicate": 0, "too_long": 0}, "candidates": 4, "replayed": 4,
          "capped": 0, "round": "oracle"}
MODEL = {"snapshot_id": "cd" * 32, "entries": {"oracle": 3, "model": 2}, "added": {"oracle": 0, "model": 2},
         "rejected": {"failed": 0, "flaky": 1, "duplicate": 2, "too_long": 0}, "candidates": 6, "replayed": 3,
         "capped": 1, "round": "model"}


def test_rounds_come_in_generation_then_round_order_and_other_records_give_none() -> None:
    records = [
        (1, {"experience": {"model": MODEL}}),
        (0, {"experience": {"model": MODEL, "oracle": ORACLE}, "search": {"covered": 1}}),
        (2, {"search": {}}),
        (3, {"experience": "off"}),
    ]
    rows = round_rows(records)
    assert [(r.generation, r.round) for r in rows] == [(0, "oracle"), (0, "model"), (1, "model")]
    assert rows[0].added == {"oracle": 3, "model": 0} and rows[1].capped == 1


def test_table_cells_show_what_each_round_added_and_rejected() -> None:
    oracle, model = round_rows([(0, {"experience": {"oracle": ORACLE, "model": MODEL}})])
    assert table_cells(oracle) == ["0", "oracle", "4", "4", "3/0", "failed 1", "3/0"]
    assert table_cells(model) == ["0", "model", "6 (+1 capped)", "3", "0/2", "flaky 1, duplicate 2", "3/2"]


def test_the_report_json_and_markdown_carry_the_library() -> None:
    library = ExperienceReport(
        entries={"oracle": 3, "model": 2},
        rounds=round_rows([(0, {"experience": {"oracle": ORACLE, "model": MODEL}})]),
        rejections={0: {"failed": 1, "flaky": 1, "duplicate": 2, "too_long": 0}},
    )
    assert summary_text(library) == "experience library: 5 entries (3 oracle, 2 model)"
    data = ReportData(lineage_id="l", lineage_name="l", status="completed", experience=library)
    doc = json.loads(render_report(data, "json"))["experience"]
    assert doc["entries"] == {"oracle": 3, "model": 2} and doc["size"] == 5
    assert [r["round"] for r in doc["rounds"]] == ["oracle", "model"] and doc["rejections"]["0"]["duplicate"] == 2
    md = render_report(data, "md")
    assert '<a id="experience"></a>' in md and "experience library: 5 entries (3 oracle, 2 model)" in md
    assert "| 0 | model | 6 (+1 capped) | 3 | 0/2 | flaky 1, duplicate 2 | 3/2 |" in md
    assert "| 0 | 1 | 1 | 2 | 0 |" in md  # rejections by reason: failed, flaky, duplicate, too_long
    empty = render_report(ReportData(lineage_id="e", lineage_name="e", status="pending"), "md")
    assert "experience library: 0 entries (0 oracle, 0 model)" in empty and "No growth round recorded yet." in empty
