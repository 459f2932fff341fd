"""The HTML report, plots on, of lineages at the edges of the sealed intervals: it renders every section.

Each lineage is a real SQLite store (:func:`tests.unit.reports.sealed_store.fill_sealed`)
whose sealed rewards put an interval on its edge: every reward 0 (Wilson interval
[0, ...]), every reward 1 ([..., 1]), a lift whose bootstrap interval touches 0, and the
shape of the reported failure - the root pair 0 on every one of 12 sealed tasks, unequal
attempts per task, so the mean of the per-task mean rewards (the score plot's point)
differs from the pass rate (the pass-rate plot's point). The lineage was measured before
readings existed, so its sealed split is read as the *sealed tasks* reading, whose section
holds both plots.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mindforge.reports import SECTION_IDS, ReportData, gather_report_data, render_report
from mindforge.reports.reading_sections import reading_rates
from mindforge.store import make_engine, session_scope
from tests.unit.reports.sealed_store import fill_sealed

#: the shape of the reported failure: 12 sealed tasks, the first two with two attempts
REPORTED_ROOT = [[0.0, 0.0]] * 2 + [[0.0]] * 10
REPORTED_SUCCESSOR = [[0.0, 0.0]] * 2 + [[1.0]] * 4 + [[0.0]] * 6
CASES = {
    "zeros": ([[0.0]] * 12, [[0.0]] * 12),  # 12 attempts of 0: the Wilson bound rounded above 0
    "ones": ([[1.0]] * 10, [[1.0]] * 10),  # 10 attempts of 1: the Wilson bound rounded below 1
    "lift-touches-zero": ([[0.0]] * 12, [[1.0]] + [[0.0]] * 11),
    "reported-failure": (REPORTED_ROOT, REPORTED_SUCCESSOR),
}


def _gather(tmp_path: Path, name: str) -> ReportData:
    root, successor = CASES[name]
    db_url = f"sqlite:///{tmp_path / 'mindforge.db'}"
    promotion = {"decided_on": "selection", "promoted": True, "reason": "reported failure shape", "lift": {
        "mean": -0.125, "lo": -0.298, "hi": 0.048, "n_tasks": 8, "parent_score": 0.25, "successor_score": 0.125,
    }}  # fmt: skip
    fill_sealed(db_url, name, root, successor, record={"update": {"promotion": promotion}})
    engine = make_engine(db_url)
    with session_scope(engine) as session:
        data = gather_report_data(session, name)
    engine.dispose()
    return data


@pytest.mark.parametrize("name", list(CASES))
def test_the_html_report_renders_every_section_at_the_interval_edges(tmp_path: Path, name: str) -> None:
    data = _gather(tmp_path, name)
    html = render_report(data, "html")
    for section in SECTION_IDS:
        assert f'<section id="{section}">' in html, section
    assert "failed to render" not in html
    sealed = html.split('<section id="sealed-tasks">')[1].split("</section>")[0]
    png = r'<img src="data:image/png;base64,[A-Za-z0-9+/=]{5000,}"'
    assert re.search(png + ' alt="sealed tasks: pass rate per generation"', sealed)
    assert re.search(png + ' alt="sealed tasks: sealed success by pair"', sealed)
    rates = [r["interval"] for r in reading_rates(data, "tasks")]
    assert len(rates) == 2 and all(s.lo <= s.rate <= s.hi for s in rates)  # every interval holds its point


def test_the_reported_failure_shape_plots_two_different_quantities(tmp_path: Path) -> None:
    """Pooled pass rate and mean of per-task means differ here; each plot's interval is of its own point."""
    data = _gather(tmp_path, "reported-failure")
    by_adapter = {r["sealed"]["adapter"]: r["interval"] for r in reading_rates(data, "tasks")}
    assert (by_adapter[""].successes, by_adapter[""].n, by_adapter[""].rate, by_adapter[""].lo) == (0, 14, 0.0, 0.0)
    assert (by_adapter["gen0-lora"].successes, by_adapter["gen0-lora"].n) == (4, 14)
    pair0, pair1 = data.readings["tasks"].rows
    assert pair0.sealed["score"] == 0.0 and pair1.sealed["score"] == pytest.approx(4 / 12)  # not 4 / 14
    lift = pair1.lift_vs_root
    assert lift["mean"] == pytest.approx(4 / 12) and lift["lo"] <= lift["mean"] <= lift["hi"]
    assert "sealed lift +0.333" in render_report(data, "md")
