"""The report lists the search's edit predictions and their verdicts beside the failure audit.

The generation record is what ``finish_search`` writes (:func:`mindforge.search.summary.search_summary`)
after a real race in the simulated global-fix world of :mod:`benchmarks.simulate`.
"""

from __future__ import annotations

from benchmarks.simulate import WorldOracle, global_world
from mindforge.reports import SECTION_IDS, ReportData, render_report
from mindforge.reports.sections import build_sections
from mindforge.search import SearchBudget, SearchConfig, StepResults, init_search, observe, plan_step
from mindforge.search.summary import search_summary


def _searched() -> dict:
    world = global_world(0, 0.3)
    oracle = WorldOracle(world, seed=0)
    config = SearchConfig(cells_per_step=8, experience_snapshot=world.snapshot_json)
    state = init_search(
        job_id="report-race", root=world.root, tasks=world.failing, budget=SearchBudget(max_attempts=96), config=config
    )
    while not state.done:
        plan = plan_step(state)
        state = observe(state, oracle.execute(state, plan) if plan.stop_reason is None else StepResults(step=plan.step))
    return search_summary(state)


def test_each_prediction_is_listed_with_its_verdict_next_to_the_audit() -> None:
    summary = _searched()
    data = ReportData(
        lineage_id="l", lineage_name="race", status="completed",
        generations=[{"index": 0, "status": "completed", "record": {"search": summary}}],
    )  # fmt: skip
    ids = list(SECTION_IDS)
    assert ids.index("edit-predictions") == ids.index("failure-audit") + 1
    section = next(s for s in build_sections(data, with_plots=False) if s.id == "edit-predictions")
    table = next(b.table for b in section.blocks if b.kind == "table")
    assert table is not None and len(table.rows) == len(summary["predictions"])
    verdicts = [row[-1] for row in table.rows]
    assert {"refuted", "confirmed"} <= set(verdicts)
    assert verdicts == sorted(verdicts, key=["refuted", "confirmed", "untested"].index)  # refuted first
    library = next(row for row in table.rows if row[1].startswith("experience_snapshot="))
    assert library[2].startswith("every failing task") and library[-1] == "confirmed"
    counts = {v: verdicts.count(v) for v in ("confirmed", "refuted", "untested")}
    assert f"{counts['confirmed']} confirmed, {counts['refuted']} refuted, {counts['untested']} untested" in (
        section.blocks[0].text
    )
    assert "Edit predictions and verdicts" in render_report(data, "md")


def test_without_a_search_record_the_section_says_so() -> None:
    data = ReportData(lineage_id="l", lineage_name="none", status="completed", generations=[])
    section = next(s for s in build_sections(data, with_plots=False) if s.id == "edit-predictions")
    assert section.blocks[0].text == "No search recorded edit predictions yet."
