"""The report of a lineage whose sealed split is read three ways: a section, a table and plots per reading.

The store is real SQLite (:func:`tests.unit.reports.readings_store.fill_readings`): a
curriculum lineage whose generation records are written by the real sealed measurement,
all three readings with the copyable / needs-adaptation parts; generation 1 kept its
parent pair. Pooled over the 10 sealed tasks the root would pass 6 of 20 trials and the
trained pair 14 of 20: no such figure may appear anywhere.
"""

from __future__ import annotations

import json
import re

import pytest

from mindforge.evaluation.curriculum import READING_TITLES, SealedReading
from mindforge.reports import SECTION_IDS, ReportData, gather_report_data, render_report
from mindforge.reports.reading_sections import reading_rates
from mindforge.store import lineages, make_engine, session_scope
from tests.unit.reports.readings_store import NAME, PREP, ReadingsStore, fill_readings

#: the pooled figures of the root and the trained pair over all 10 sealed tasks
POOLED = ("6/20", "14/20")


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> ReadingsStore:
    return fill_readings(f"sqlite:///{tmp_path_factory.mktemp('readings') / 'mindforge.db'}")


@pytest.fixture(scope="module")
def stored(filled: ReadingsStore) -> tuple[ReportData, list[dict]]:
    engine = make_engine(filled.db_url)
    with session_scope(engine) as session:
        data = gather_report_data(session, NAME)
        records = [dict(g.record) for g in lineages.list_generations(session=session, lineage_id=NAME)]
    engine.dispose()
    return data, records


def _section(text: str, section_id: str) -> str:
    return text.split(f'<section id="{section_id}">')[1].split("</section>")[0]


def test_each_reading_has_its_table_from_its_own_records(filled: ReadingsStore, stored) -> None:
    data, records = stored
    assert list(data.readings) == ["instances", "families", "tasks"]
    assert data.readings_record.tasks == {"instances": 4, "families": 3, "tasks": 3, "restated": 0, "dealt": 0}
    assert data.readings_record.families == {"instances": 2, "families": 1}  # printed beside the task counts
    assert (data.readings_record.copyable, data.readings_record.needs_adaptation) == (2, 2)
    for reading, table in data.readings.items():
        assert table.title == READING_TITLES[SealedReading(reading)] and table.n_tasks == len(filled.tasks[reading])
        row0, row1, row2 = table.rows
        first = records[0]["readings"][reading]
        assert row0.sealed["score"] == first["parent"]["score"] and row1.sealed["score"] == first["successor"]["score"]
        assert row1.lift_vs_prev == first["lift_vs_prev"] and row1.attribution == first["attribution"]
        assert row1.base == row0.sealed and row2.base == row0.sealed  # pair 0 beside every pair, read once
        assert (row1.kept, row2.kept) == (False, True) and row2.sealed == row1.sealed  # the same trials, read once
        assert all(r.sealed_tasks_sha256 == first["sealed_tasks_sha256"] for r in table.rows)
    scores = {r: [row.sealed["score"] for row in t.rows[:2]] for r, t in data.readings.items()}
    assert scores == {"instances": [0.25, 1.0], "families": [0.0, pytest.approx(1 / 3)],
                      "tasks": [pytest.approx(1 / 3), pytest.approx(2 / 3)]}
    parts = data.readings["instances"].rows[1].parts
    assert parts["copyable"]["sealed"]["score"] == parts["needs_adaptation"]["sealed"]["score"] == 1.0
    assert parts["copyable"]["base"]["score"] == 0.5 and parts["needs_adaptation"]["base"]["score"] == 0.0
    assert parts["needs_adaptation"]["lift_vs_root"]["mean"] == 1.0
    assert not data.readings["families"].rows[1].parts


def test_the_curriculum_is_gathered_from_the_spec_and_the_pool(stored) -> None:
    data, _records = stored
    cur = data.curriculum
    assert cur is not None and cur.training_families == ["alpha", "beta"] and cur.sealed_families == ["gamma"]
    assert cur.per_family == {
        "alpha": {"search": 2, "selection": 1, "sealed": 2}, "beta": {"search": 2, "selection": 1, "sealed": 2},
        "gamma": {"search": 0, "selection": 0, "sealed": 3},
    }
    assert (cur.validated, cur.cached, cur.rejected) == (14, 2, PREP["rejected"])
    assert cur.rejected_by_verdict == {"build_failed": 1, "nop_passed": 1} and cur.warnings == PREP["warnings"]


def test_html_has_a_section_and_two_plots_per_reading(stored) -> None:
    data, _records = stored
    html = render_report(data, "html")
    assert all(f'<section id="{s}">' in html for s in SECTION_IDS) and "failed to render" not in html
    # a figure of each reading that no other reading has (pair 0 on instances and families, pair 1 on tasks)
    own = {"instances": "0.250 (2/8 passed, 4 tasks)", "families": "0.000 (0/6 passed, 3 tasks)",
           "tasks": "0.667 (4/6 passed, 3 tasks)"}
    for reading, figure in own.items():
        part = _section(html, f"sealed-{reading}")
        name = f"sealed {reading}"
        for alt in (f"{name}: pass rate per generation", f"{name}: sealed success by pair"):
            assert re.search(rf'<img src="data:image/png;base64,[A-Za-z0-9+/=]{{5000,}}" alt="{alt}"', part), alt
        assert figure in part and all(f not in part for r, f in own.items() if r != reading)
        assert "= pair 1 (kept; re-read, not run again)" in part
    instances = _section(html, "sealed-instances")
    assert "copyable: success" in instances and "needs adaptation: lift vs pair 0" in instances
    assert "copyable" not in _section(html, "sealed-families")
    assert html.count("<img") == 6  # two per reading; the lineage ran no search-split trial
    assert not any(p in html for p in POOLED)


def test_each_pair_is_one_row_with_its_re_reads_marked(stored) -> None:
    data, _records = stored
    rates = reading_rates(data, "instances")
    shown = [(r["generation"], r["role"], r["pair"], r["pairs"], (r["interval"].successes, r["interval"].n),
              r["reread_in"]) for r in rates]
    # pair 0 (generation 1's base) and pair 1 (generation 1's parent, and the pair it kept: pair 2) are one row
    # each, from generation 0, re-read in generation 1 - never a second interval from the same trials
    assert shown == [(0, "parent", 0, [0], (2, 8), [1]), (0, "handed on", 1, [1, 2], (8, 8), [1])]
    for reading in data.readings:
        for r in reading_rates(data, reading):
            assert r["interval"].lo <= r["interval"].rate <= r["interval"].hi
    # the stored figures say which generation ran the trials read: generation 0, for both generations
    for g in data.generations:
        figures = g["readings"]["instances"]
        assert figures["sealed_parent"]["run_in"] == figures["sealed"]["run_in"] == [0]
    html = render_report(data, "html")
    assert "re-read in generation 1 (the same trials, not run again)" in _section(html, "sealed-instances")
    assert "1 (handed on); = pair 2 (kept)" in _section(html, "sealed-instances")


def test_markdown_names_every_figure_by_its_reading(stored) -> None:
    data, _records = stored
    md = render_report(data, "md")
    assert "Generation 0: sealed instances: sealed lift +0.750 (95% CI -0.456..+0.999) on 4 sealed tasks in 2 " \
        "families, 16 trials; MOVER-Wilson by unit; sealed families: sealed lift +0.333" in md
    assert "Generation 1: kept its parent pair" in md
    assert "| 0 | sealed instances | +0.750 (95% CI -0.456..+0.999) on 4 sealed tasks in 2 families, 16 trials; " \
        "MOVER-Wilson by unit |" in md
    # the report's top names every headline reading, the families beside the task count and the method
    assert "sealed families: pair 1 over pair 0 +0.333 [-1.000, +1.000] n=3 (1 family); MOVER-Wilson by unit" in md
    assert "| alpha | training | 2 | 1 | 2 |" in md and "| gamma | held out | 0 | 0 | 3 |" in md
    assert "| alpha-deadbeef | build_failed | docker build exited 1 |" in md
    assert "2 rejected (build_failed 1, nop_passed 1)" in md and "Warnings: family beta admits" in md
    assert "| 2 | gen 1 | fam@1.1.0 / gen0-lora | = pair 1 (kept; re-read, not run again) |" in md
    assert "data:image" not in md and not any(p in md for p in POOLED)


def test_json_carries_the_figures_per_generation_and_reading(stored) -> None:
    data, records = stored
    text = render_report(data, "json")
    assert ReportData.model_validate_json(text) == data
    doc = json.loads(text)
    assert doc["readings_record"]["sealed_families"] == ["gamma"] and doc["curriculum"]["validated"] == 14
    assert [r["pair"] for r in doc["readings"]["families"]["rows"]] == [0, 1, 2]
    for g, record in zip(doc["generations"], records, strict=True):
        assert list(g["readings"]) == ["instances", "families", "tasks"]
        assert list(g["sealed_lifts"]) == ["instances", "families", "tasks"]  # one figure per reading, each named
        for reading, figures in g["readings"].items():
            assert figures["sealed"]["score"] == record["readings"][reading]["successor"]["score"]
            assert figures["lift_vs_root"] == record["readings"][reading]["lift_vs_root"]
        assert "sealed" not in g and "lift_vs_prev" not in g  # no unnamed sealed figure beside the readings
    parts = doc["generations"][0]["readings"]["instances"]["parts"]
    assert parts["copyable"]["lift_vs_root"] == records[0]["reading_parts"]["copyable"]["lift_vs_root"]
