"""``mindforge lineage status`` shows each sealed reading under its own name: one table each, never a pooled figure.

Real SQLite stores under the test's data dir: the readings store (a curriculum lineage
measured by the real sealed stage, all three readings with the copyable / needs-adaptation
parts; generation 1 kept its parent pair) and the report store (a lineage measured before
readings existed: ``record["compounding"]`` only, read as *sealed tasks*).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mindforge.cli.main import app
from mindforge.evaluation.curriculum import READING_TITLES, SealedReading
from mindforge.settings import get_settings
from mindforge.store import lineages, make_engine, session_scope
from tests.unit.reports.readings_store import NAME, fill_readings
from tests.unit.reports.report_store import fill_store

runner = CliRunner()
READING_KEYS = {
    "sealed", "sealed_parent", "base", "kept", "lift_vs_prev", "lift_vs_prev_reason", "lift_vs_root",
    "lift_vs_root_reason", "attribution", "n_tasks", "sealed_tasks_sha256", "parts",
}


def _use(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("MINDFORGE_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("MINDFORGE_DATABASE_URL", raising=False)
    get_settings.cache_clear()
    return get_settings().db_url


@pytest.fixture
def readings(tmp_path, monkeypatch):
    """Settings on a store holding the readings lineage; yields its stored generation records."""
    db_url = _use(tmp_path, monkeypatch)
    fill_readings(db_url)
    engine = make_engine(db_url)
    with session_scope(engine) as s:
        records = [dict(g.record) for g in lineages.list_generations(session=s, lineage_id=NAME)]
    engine.dispose()
    yield records
    get_settings.cache_clear()


@pytest.fixture
def old(tmp_path, monkeypatch):
    """Settings on a store holding a lineage measured before readings existed; yields its id (what status reads)."""
    filled = fill_store(_use(tmp_path, monkeypatch), discovery=False)
    yield filled.lineage_id
    get_settings.cache_clear()


def _status(*args: str):
    result = runner.invoke(app, ["lineage", "status", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def _tables(text: str) -> dict[str, str]:
    """Reading -> the text of its table (from its title to the next reading's title, or the end)."""
    starts = {r.value: text.index(READING_TITLES[r]) for r in SealedReading if READING_TITLES[r] in text}
    ends = sorted(starts.values()) + [len(text)]
    return {r: text[i:ends[ends.index(i) + 1]] for r, i in starts.items()}


def test_status_prints_one_table_per_reading_with_the_kept_mark(readings) -> None:
    text = _status(NAME)
    assert "sealed readings, never pooled: sealed instances 4 tasks in 2 families (copyable 2, needs adaptation 2; " \
        "of alpha, beta); sealed families 3 tasks in 1 family (held out: gamma); sealed tasks 3 tasks" in text
    # the headline: every reading, the families beside the task count, the interval's method named
    assert "sealed families: pair 1 over pair 0 +0.333 [-1.000, +1.000] n=3 (1 family); MOVER-Wilson by unit" in text
    tables = _tables(text)
    assert text.index(READING_TITLES[SealedReading.INSTANCES]) < text.index(READING_TITLES[SealedReading.FAMILIES]) \
        < text.index(READING_TITLES[SealedReading.TASKS])
    # each table its own figures: pair 0 and pair 1 on that reading's tasks only
    assert "0.250 (2/8)" in tables["instances"] and "1.000 (8/8)" in tables["instances"]
    assert "0.000 (0/6)" in tables["families"] and "0.333 (2/6)" in tables["families"]
    assert "0.333 (2/6)" in tables["tasks"] and "0.667 (4/6)" in tables["tasks"]
    assert "held out: gamma" in tables["families"].splitlines()[0]
    # the copyable / needs-adaptation columns under the instances reading only
    assert "copyable" in tables["instances"] and "0.500 (2/4)" in tables["instances"]
    assert "copyable" not in tables["families"] + tables["tasks"]
    for table in tables.values():  # pair 2 is pair 1: marked, not shown as a new measurement
        assert "= pair 1 (kept;" in table  # Rich wraps the rest of the mark as the width allows
    # the per-generation table names each reading beside its lift over the parent pair
    for line in ("sealed instances: +0.75 [-0.46, +1.00]", "sealed families: +0.33 [-1.00, +1.00]",
                 "sealed tasks: +0.33 [-0.49, +0.94], 3 tasks", "sealed instances: kept its parent pair"):
        assert line in text, line
    assert "one frozen sealed split" not in text  # the pooled table's title is gone


def test_status_json_carries_every_reading_per_generation(readings) -> None:
    doc = json.loads(_status(NAME, "--json"))
    record = doc["readings_record"]
    assert {k: record[k] for k in ("recorded", "training_families", "sealed_families", "copyable")} == {
        "recorded": True, "training_families": ["alpha", "beta"], "sealed_families": ["gamma"], "copyable": 2,
    }
    assert record["tasks"] == {"instances": 4, "families": 3, "tasks": 3, "restated": 0, "dealt": 0}
    assert record["families"] == {"instances": 2, "families": 1} and record["needs_adaptation"] == 2
    assert record["checks"].endswith("the last: generation 1: before the sealed measurement")
    assert list(doc["readings"]) == ["instances", "families", "tasks"]
    for reading, table in doc["readings"].items():
        assert table["reading"] == reading and table["title"] == READING_TITLES[SealedReading(reading)]
        assert [r["pair"] for r in table["rows"]] == [0, 1, 2] and [r["kept"] for r in table["rows"]] == [0, 0, 1]
    assert doc["readings"]["families"]["families"] == ["gamma"] and doc["readings"]["tasks"]["n_tasks"] == 3
    first, second = doc["generations"]
    # one sealed lift per reading, never one under a general name
    assert first["sealed_reading"] is None and list(first["readings"]) == ["instances", "families", "tasks"]
    assert list(first["record"]["sealed_lifts"]) == ["instances", "families", "tasks"]
    for g, record in zip(doc["generations"], readings, strict=True):
        for reading, figures in g["readings"].items():
            stored = record["readings"][reading]
            assert set(figures) == READING_KEYS
            assert figures["sealed"]["score"] == stored["successor"]["score"]
            assert figures["sealed_parent"]["score"] == stored["parent"]["score"]
            assert (
                figures["lift_vs_prev"] == stored["lift_vs_prev"] and figures["lift_vs_root"] == stored["lift_vs_root"]
            )
            assert figures["attribution"] == stored["attribution"] and figures["n_tasks"] == len(stored["sealed_tasks"])
            assert figures["base"]["score"] == (stored["root"] or stored["parent"])["score"]
            assert bool(figures["parts"]) == (reading == "instances")
    assert [first["readings"][r]["kept"] for r in first["readings"]] == [False] * 3
    assert all(f["kept"] and f["lift_vs_prev"] is None for f in second["readings"].values())
    copyable = first["readings"]["instances"]["parts"]["copyable"]
    stored = readings[0]["reading_parts"]["copyable"]
    assert copyable["sealed"]["score"] == stored["successor"]["score"] == 1.0 and copyable["n_tasks"] == 2
    assert copyable["lift_vs_root"] == stored["lift_vs_root"] and copyable["base"]["score"] == 0.5


def test_an_old_lineage_shows_its_sealed_split_as_sealed_tasks(old) -> None:
    text = _status(old)
    assert "sealed readings, never pooled: sealed instances: none (it draws no task families, so no unseen " \
        "instance of a training family is sealed); sealed families: none (it holds out no task family); sealed " \
        "tasks 2 tasks (started before readings were recorded" in text
    assert READING_TITLES[SealedReading.TASKS] in text
    assert READING_TITLES[SealedReading.INSTANCES] not in text and READING_TITLES[SealedReading.FAMILIES] not in text
    doc = json.loads(_status(old, "--json"))
    assert list(doc["readings"]) == ["tasks"] and doc["readings"]["tasks"]["before_readings"] == [0, 1]
    for g in doc["generations"]:
        assert list(g["readings"]) == ["tasks"] and g["sealed_reading"] == "tasks"
        assert g["readings"]["tasks"]["sealed"]["score"] == g["record"]["compounding"]["successor"]["score"]
