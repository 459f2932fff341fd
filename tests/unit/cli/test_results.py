"""The results printout ends with the compounding tables: one block per sealed reading, lifts with 95% intervals.

Two real SQLite stores: the report store (a lineage measured before readings existed: its
records carry ``compounding`` only, read as the *sealed tasks* reading) and the readings
store (a curriculum lineage whose records carry all three readings and the copyable /
needs-adaptation parts; generation 1 kept its parent pair).
"""

from __future__ import annotations

import pytest

from mindforge.cli.results import compounding_lines, results_lines
from mindforge.evaluation.curriculum import READING_TITLES, SealedReading
from mindforge.reports import gather_report_data
from mindforge.store import make_engine, session_scope
from tests.unit.reports.readings_store import fill_readings
from tests.unit.reports.report_store import fill_store


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    # no Discovery record: the filled store writes an older shape of it than the results lines read
    return fill_store(f"sqlite:///{tmp_path_factory.mktemp('results') / 'mindforge.db'}", discovery=False)


@pytest.fixture(scope="module")
def readings(tmp_path_factory):
    return fill_readings(f"sqlite:///{tmp_path_factory.mktemp('readings') / 'mindforge.db'}")


def _lines(db_url: str, name: str):
    engine = make_engine(db_url)
    with session_scope(engine) as session:
        lines = results_lines(session, name)
        data = gather_report_data(session, name)
    engine.dispose()
    return lines, data


def _figure(lift: dict) -> str:
    families = {1: " (1 family)"}.get(lift.get("n_units"), f" ({lift.get('n_units')} families)")
    return f"{lift['mean']:+.3f} [{lift['lo']:+.3f}, {lift['hi']:+.3f}] n={lift['n_tasks']}" + (
        families if lift.get("unit") == "family" else ""
    )


def test_an_old_lineage_reads_its_whole_sealed_split_as_sealed_tasks(filled) -> None:
    lines, data = _lines(filled.db_url, filled.lineage_name)
    rows = data.readings["tasks"].rows
    table = compounding_lines(data)
    assert lines[-len(table):] == table and len(table) == 2 + 2 + 1 + 3 + 1 == 9
    assert "never pooled" in table[0] and "95% CI" in table[0]
    assert table[1] == "  sealed readings, never pooled: sealed instances: none (it draws no task families, so no " \
        "unseen instance of a training family is sealed); sealed families: none (it holds out no task family); " \
        "sealed tasks 2 tasks (started before readings were recorded: its sealed split is read whole)"
    assert table[2] == f"{READING_TITLES[SealedReading.TASKS]}: 2 tasks:"
    assert "generation(s) 0, 1 measured before readings existed" in table[3]
    root, first, kept = table[4], table[5:8], table[8]
    assert root.startswith("  pair 0 (root, ") and "lift" not in root
    assert f"sealed {rows[0].sealed['score']:.3f} ({rows[0].sealed['passed']}/" in root
    assert first[0].startswith("  pair 1 (handed on by gen 0, ") and "sealed 0.250" in first[0]
    assert first[0].endswith(f"; pair 0 {rows[0].sealed['score']:.3f} (0/4 passed, 2 tasks)")
    figure = _figure(rows[1].lift_vs_prev)
    assert first[1] == f"    lift vs previous (pair 0) {figure}; vs root (pair 0) {figure}"
    assert "harness part " in first[2] and "weights part unchanged" in first[2]
    # generation 1 kept its pair: one line, the same pair read once, no new figure
    assert kept.startswith("  pair 2 (handed on by gen 1, ")
    assert kept.endswith(": = pair 1 (kept; re-read, not run again)")
    # the per-generation lines name the reading their sealed lift is of
    assert "  sealed lift over the parent pair (sealed tasks): +0.250 (95% CI +0.000..+0.500) on 2 sealed tasks, " \
        "8 trials; percentile bootstrap by task" in lines
    # every headline reading named, the ones an old lineage lacks too
    assert "  sealed lift over the parent pair (sealed families): none in this lineage" in lines


def test_each_reading_is_its_own_block_with_its_parts(readings) -> None:
    lines, data = _lines(readings.db_url, readings.lineage)
    table = compounding_lines(data)
    assert lines[-len(table):] == table
    titles = [i for i, line in enumerate(table) if line.startswith("sealed ") and line.endswith(":")]
    blocks = [table[a:b] for a, b in zip(titles, [*titles[1:], len(table)], strict=True)]
    assert [b[0] for b in blocks] == [
        f"{READING_TITLES[SealedReading.INSTANCES]}: 4 tasks in 2 families; training families alpha, beta:",
        f"{READING_TITLES[SealedReading.FAMILIES]}: 3 tasks in 1 family; held out: gamma:",
        f"{READING_TITLES[SealedReading.TASKS]}: 3 tasks:",
    ]
    assert table[1] == "  sealed readings, never pooled: sealed instances 4 tasks in 2 families (copyable 2, needs " \
        "adaptation 2; of alpha, beta); sealed families 3 tasks in 1 family (held out: gamma); sealed tasks 3 tasks"
    instances, families, tasks = blocks
    rows = {r: data.readings[r].rows for r in data.readings}
    # each block its own figures: R passes 1 of 4 instances, 0 of 3 families, 1 of 3 tasks; P 4, 1 and 2
    assert instances[1] == "  pair 0 (root, fam@1.0.0 / base): sealed 0.250 (2/8 passed, 4 tasks)"
    assert families[1] == "  pair 0 (root, fam@1.0.0 / base): sealed 0.000 (0/6 passed, 3 tasks)"
    assert tasks[1] == "  pair 0 (root, fam@1.0.0 / base): sealed 0.333 (2/6 passed, 3 tasks)"
    assert instances[4].startswith("  pair 1 (handed on by gen 0, fam@1.1.0 / gen0-lora): sealed 1.000 (8/8 passed")
    assert families[2].startswith("  pair 1 (handed on by gen 0, fam@1.1.0 / gen0-lora): sealed 0.333 (2/6 passed")
    for block, reading in zip(blocks, ("instances", "families", "tasks"), strict=True):
        figure = _figure(rows[reading][1].lift_vs_prev)
        lift = next(line for line in block if line.startswith("    lift vs previous (pair 0)"))
        assert lift == f"    lift vs previous (pair 0) {figure}; vs root (pair 0) {figure}"
        parts = next(line for line in block if line.startswith("    of the lift vs previous"))
        harness, weights = (rows[reading][1].attribution[k]["lift"] for k in ("harness", "weights"))
        assert parts == f"    of the lift vs previous: harness part {_figure(harness)}; weights part {_figure(weights)}"
        assert block[-1] == (
            "  pair 2 (handed on by gen 1, fam@1.1.0 / gen0-lora): = pair 1 (kept; re-read, not run again)"
        )
    # the instances reading's copyable and needs-adaptation parts, under each measured pair
    assert instances[2:4] == [
        "    copyable: sealed 0.500 (2/4 passed, 2 tasks)", "    needs adaptation: sealed 0.000 (0/4 passed, 2 tasks)",
    ]
    copyable = _figure(rows["instances"][1].parts["copyable"]["lift_vs_root"])
    assert instances[7:9] == [
        f"    copyable: sealed 1.000 (4/4 passed, 2 tasks); vs pair 0 {copyable}",
        # two families: not the certainty of the bootstrap's [+1.000, +1.000] over two tasks
        "    needs adaptation: sealed 1.000 (4/4 passed, 2 tasks); vs pair 0 +1.000 [-0.380, +1.000] n=2 (2 families)",
    ]
    assert not any("copyable" in line for line in families + tasks)
    assert "  sealed lift over the parent pair (sealed instances): +0.750 (95% CI -0.456..+0.999) on 4 sealed " \
        "tasks in 2 families, 16 trials; MOVER-Wilson by unit" in lines


def test_no_sealed_measurement_says_so(filled) -> None:
    _lines_, data = _lines(filled.db_url, filled.lineage_name)
    empty = {
        reading: table.model_copy(update={"rows": [r.model_copy(update={"sealed": None}) for r in table.rows]})
        for reading, table in data.readings.items()
    }
    assert compounding_lines(data.model_copy(update={"readings": empty})) == [
        "compounding: no pair measured on the sealed split"
    ]


def test_a_decision_says_what_it_reused_and_how_its_race_ended() -> None:
    from mindforge.cli.last_screen import generation_row
    from mindforge.cli.results import _decisions
    from mindforge.reports import ReportData

    data = ReportData(lineage_id="x", lineage_name="x", status="completed")
    successor = {
        "kind": "successor_contract", "decided_on": "selection", "promoted": False, "cannot_compare": False,
        "contract_hash": "p" * 64, "reason": "no candidate's selection lift passes the gate", "trial_ids": ["a"] * 30,
        "rule": "promote ...", "reused": [{"generation": 0, "contract_hash": "p" * 64, "adapter": "", "trials": 24}],
        "race": {"run_trials": 38, "full_trials": 48, "stopped_early": True, "settled": {"c" * 64: "fails"}},
    }
    lines = _decisions(data, [successor])
    assert lines[2] == "    reused trials: 24 of generation 0 (read, not run again)"
    assert lines[3] == "    race: 38 of the full race's 48 trials stored, stopped once settled; candidates: " \
        f"{'c' * 12} fails"
    apart = {"kind": "adapter_promotion", "decided_on": "selection", "promoted": False, "cannot_compare": True,
             "reason": "cannot compare: the two pairs share no scored selection task"}
    first = _decisions(data, [apart])[0]
    assert first.startswith("  adapter promotion (decided on selection, 0 trials): cannot compare")
    row = generation_row(1, 10.0, {"successor": {"promoted": False, "cannot_compare": True}})
    assert row[2] == "cannot compare: kept the parent"
