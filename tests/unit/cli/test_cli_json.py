"""``--json`` on the listing and status commands: one JSON document on stdout, stable keys.

``lineage list`` and ``lineage status`` read a real, migrated SQLite store under the
test's data dir, filled through the store's repository functions the way the lineage
activities fill it; ``hcp show`` reads the shipped contracts. (``dev status`` and
``schedule list`` need the dev stack and Temporal: tests/integration/test_devstack.py and
tests/e2e/test_schedule_and_status.py.)
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mindforge.cli.main import app
from mindforge.hcp import canonical_json, load_contract
from mindforge.settings import get_settings
from mindforge.store import init_db, lineages, registry, session_scope
from mindforge.store.models import Lineage, RunStatus
from tests.conftest import REPO

runner = CliRunner()
BASELINE = REPO / "hcp_contracts" / "baseline.toml"
LINEAGE_KEYS = {"id", "name", "status", "current_generation", "workflow_id", "created_at", "updated_at"}
GENERATION_KEYS = {
    "index", "status", "stages_run", "contract_hash", "adapter_revision_id", "started_at", "finished_at", "record",
    # per sealed reading, the figures of the pair the generation hands on (mindforge.reports.compounding)
    "sealed_reading", "readings",
}


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A data dir whose store holds lineage ``night`` (two generations) and lineage ``day`` (none)."""
    monkeypatch.setenv("MINDFORGE_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("MINDFORGE_DATABASE_URL", raising=False)
    get_settings.cache_clear()
    contract = load_contract(BASELINE)
    engine = init_db(get_settings().db_url)
    with session_scope(engine) as s:
        # as prepare_lineage stores it: the lineage id is its name
        s.add(Lineage(id="night", name="night", spec={"generations": 2}, workflow_id="lineage-night"))
        s.add(Lineage(id="day", name="day", spec={"generations": 1}))
        s.flush()
        registry.register_hcp_contract(session=s, contract=contract)
        for index in (0, 1):
            lineages.create_generation(session=s, lineage_id="night", index=index, contract_hash=contract.content_hash)
        lineages.mark_stage_run(session=s, lineage_id="night", generation_index=0, stage="expansion")
        lineages.update_generation(
            session=s, lineage_id="night", index=0, status=RunStatus.COMPLETED,
            record={"expansion": {"tasks": 3, "solved_tasks": 1, "trials": 6, "passed": 2}},
        )
    engine.dispose()
    yield contract
    get_settings.cache_clear()


def _json(args: list[str]):
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # the whole of stdout is one document


def test_lineage_list_json(store):
    rows = _json(["lineage", "list", "--json"])
    assert sorted(r["name"] for r in rows) == ["day", "night"]
    assert all(set(r) == LINEAGE_KEYS for r in rows)
    night = next(r for r in rows if r["name"] == "night")
    assert night["workflow_id"] == "lineage-night" and night["status"] == "pending"
    assert night["current_generation"] == 0 and night["created_at"].endswith("+00:00")
    assert next(r for r in rows if r["name"] == "day")["workflow_id"] is None


def test_lineage_status_json(store):
    doc = _json(["lineage", "status", "night", "--json"])
    assert set(doc) == LINEAGE_KEYS | {"spec", "web_ui", "generations", "readings_record", "readings", "experience"}
    assert doc["experience"] == {"entries": {"oracle": 0, "model": 0}, "rounds": [], "rejections": {}, "size": 0}
    # no readings recorded and no sealed task in the pool: no reading, and nothing measured
    assert doc["readings"] == {} and doc["readings_record"]["recorded"] is False
    assert doc["readings_record"]["tasks"] == {"instances": 0, "families": 0, "tasks": 0, "restated": 0, "dealt": 0}
    assert doc["generations"][0]["readings"] == {} and doc["generations"][0]["sealed_reading"] is None
    assert doc["spec"] == {"generations": 2} and doc["web_ui"].endswith("/workflows/lineage-night")
    first, second = doc["generations"]
    assert set(first) == GENERATION_KEYS and [first["index"], second["index"]] == [0, 1]
    assert first["status"] == "completed" and first["stages_run"] == ["expansion"]
    assert first["record"]["expansion"]["solved_tasks"] == 1 and second["record"] == {}
    assert first["contract_hash"] == store.content_hash and first["adapter_revision_id"] is None


def test_lineage_status_json_of_unknown_lineage_fails(store):
    result = runner.invoke(app, ["lineage", "status", "nope", "--json"])
    assert result.exit_code != 0 and result.stdout == ""


def test_tables_stay_the_default(store):
    result = runner.invoke(app, ["lineage", "list"])
    assert result.exit_code == 0 and "night" in result.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.stdout)
    status = runner.invoke(app, ["lineage", "status", "night"])
    assert status.exit_code == 0 and "experience library: 0 entries (0 oracle, 0 model)" in status.stdout


@pytest.mark.parametrize("name", ["baseline.toml", "native-tools.toml"])
def test_hcp_show_json(name):
    path = REPO / "hcp_contracts" / name
    contract = load_contract(path)
    doc = _json(["hcp", "show", str(path), "--json"])
    assert set(doc) == {
        "path", "ref", "version", "content_hash", "name", "revision", "parent", "edit", "description",
        "unknown_keys", "experience", "document",
    }
    assert doc["experience"] is None  # no shipped contract carries an experience snapshot
    assert doc["ref"] == contract.ref and doc["content_hash"] == contract.content_hash
    # the document is what the content hash covers
    assert doc["document"] == json.loads(canonical_json(contract.to_document()))
    assert doc["parent"] == (contract.mindforge.parent or None)


def test_hcp_show_json_of_a_missing_file_fails(tmp_path):
    result = runner.invoke(app, ["hcp", "show", str(tmp_path / "none.toml"), "--json"])
    assert result.exit_code == 1 and result.stdout == ""
