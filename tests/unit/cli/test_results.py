"""The results printout ends with the compounding table: one line per pair, lifts with 95% intervals and task counts."""

from __future__ import annotations

import pytest

from mindforge.cli.results import compounding_lines, results_lines
from mindforge.reports import gather_report_data
from mindforge.store import make_engine, session_scope
from tests.unit.reports.report_store import fill_store


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    # no Discovery record: the filled store writes an older shape of it than the results lines read
    return fill_store(f"sqlite:///{tmp_path_factory.mktemp('results') / 'mindforge.db'}", discovery=False)


def test_results_end_with_the_compounding_table_of_the_store(filled) -> None:
    engine = make_engine(filled.db_url)
    with session_scope(engine) as session:
        lines = results_lines(session, filled.lineage_name)
        data = gather_report_data(session, filled.lineage_name)
    engine.dispose()
    rows = data.compounding
    table = compounding_lines(data)
    assert lines[-len(table):] == table and len(table) == 1 + 1 + 3 * (len(rows) - 1) == 8
    assert "frozen sealed split (2 tasks" in table[0] and "95% CI" in table[0]
    root, first, second = table[1], table[2:5], table[5:8]
    assert root.startswith("  pair 0 (root, ") and "lift" not in root
    assert f"sealed {rows[0].sealed['score']:.3f} ({rows[0].sealed['passed']}/" in root
    lift = rows[1].lift_vs_prev
    assert first[0].startswith("  pair 1 (handed on by gen 0, ") and "sealed 0.250" in first[0]
    figure = f"{lift['mean']:+.3f} [{lift['lo']:+.3f}, {lift['hi']:+.3f}] n={lift['n_tasks']}"
    assert first[1] == f"    lift vs previous (pair 0) {figure}; vs root (pair 0) {figure}"
    assert "harness part " in first[2] and "weights part unchanged" in first[2]
    # generation 1 kept its pair and ran no root trials: no figure, the reasons instead
    assert "lift vs previous (pair 1) - (the generation kept its parent pair" in second[1]
    assert f"vs root (pair 0) - ({rows[2].lift_vs_root_reason})" in second[1]

def test_no_sealed_measurement_says_so(filled) -> None:
    engine = make_engine(filled.db_url)
    with session_scope(engine) as session:
        data = gather_report_data(session, filled.lineage_name)
    engine.dispose()
    empty = data.model_copy(update={"compounding": [r.model_copy(update={"sealed": None}) for r in data.compounding]})
    assert compounding_lines(empty) == ["compounding: no pair measured on the sealed split"]
