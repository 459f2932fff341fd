"""The main job's last screen: one row per generation, one row per (sealed reading, pair), never pooled.

On a real SQLite store: a curriculum lineage whose records carry all three readings and
whose generation 1 kept its parent pair (``tests/unit/reports/readings_store.py``).
"""

from __future__ import annotations

import pytest

from mindforge.cli.last_screen import READING_COLUMNS, generation_row, last_screen
from mindforge.store import make_engine, session_scope
from tests.unit.reports.readings_store import fill_readings


@pytest.fixture(scope="module")
def readings(tmp_path_factory):
    return fill_readings(f"sqlite:///{tmp_path_factory.mktemp('last') / 'mindforge.db'}")


def _cells(table) -> list[list[str]]:
    return [[str(c) for c in col.cells] for col in table.columns]


def test_one_row_per_reading_and_pair_with_counts_lift_and_parts(readings) -> None:
    engine = make_engine(readings.db_url)
    with session_scope(engine) as session:
        generations, sealed = last_screen(session, readings.lineage)
    engine.dispose()
    assert [c.header for c in sealed.columns] == list(READING_COLUMNS)
    reading, pair, success, lift, harness, weights = _cells(sealed)
    named = [r for r in reading if r]
    assert [n.split(" (")[0] for n in named] == ["sealed instances", "sealed families", "sealed tasks"]  # never pooled
    assert "in 2 families" in named[0] and "in 1 family" in named[1]  # the families beside the task count
    assert any("(2 families)" in cell for cell in lift)
    pairs_per_reading = len(pair) // 3
    assert pair[:pairs_per_reading][0] == "0 (root)" and all("/" in s or s.startswith("=") for s in success)
    kept = [i for i, s in enumerate(success) if s.startswith("= pair")]
    assert kept and all(lift[i] == "-" for i in kept)  # a kept pair is re-read, not a new figure
    measured = [i for i, p in enumerate(pair) if p not in ("0 (root)",) and i not in kept]
    assert measured and all("[" in lift[i] and "n=" in lift[i] for i in measured)
    assert all(harness[i] != "" and weights[i] != "" for i in measured)
    assert len(generations.rows) >= 2


def test_a_headline_reading_the_lineage_lacks_is_a_row_saying_why() -> None:
    from mindforge.cli.last_screen import readings_rows
    from mindforge.reports.readings import ReadingTable

    only_instances = {"instances": ReadingTable(reading="instances", title="t", n_tasks=3, n_families=3)}
    rows = readings_rows(only_instances)
    # the in-distribution reading never stands alone: the transfer readings are named, with why there is none
    assert [r[0] for r in rows if r[0]] == [
        "sealed instances (3 tasks in 3 families)", "sealed families", "sealed tasks"
    ]
    assert rows[-2][2].startswith("none: it holds out no task family") and rows[-1][2].startswith("none: it pins no")


def test_a_generation_row_says_what_decided_and_what_trained() -> None:
    record = {
        "successor": {"promoted": True, "lift": [0.346, 0.154, 0.577], "n_tasks": 13},
        "update": {"outcome": "promoted", "iterations": [{"steps": 2, "guided_groups": 3}, {"steps": 0}]},
    }
    assert generation_row(0, 1175.4, record) == [
        "0", "1175 s", "promoted +0.346 [+0.154, +0.577], 13 tasks",
        "promoted (2 iterations, 1 trained, 3 guided groups)",
    ]
    assert generation_row(1, None, {}) == ["1", "-", "-", "-"]
    timed = {"stage_sec": {"discovery": 12.4, "expansion.base": 40.0, "expansion.search": 91.2, "update": 80.0}}
    assert generation_row(2, 230.0, timed)[1] == "230 s (discovery 12, base eval 40, search 91, update 80 s)"
