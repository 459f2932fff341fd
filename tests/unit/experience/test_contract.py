"""The experience snapshot in the HCP contract: hash coverage, load checks, what a trial shows, show/diff, ATIF."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mindforge.agent.atif_export import transcript_to_atif
from mindforge.agent.prompts import render_examples
from mindforge.cli.main import app
from mindforge.experience import ExperienceSnapshot, attach_snapshot, contract_snapshot, shown_entries
from mindforge.hcp import ContractError, derive, dump_contract, load_contract, loads_contract, save_contract
from tests.conftest import REPO
from tests.unit.experience.helpers import LIBRARY, entry

BASELINE = load_contract(REPO / "hcp_contracts" / "baseline.toml")
SNAPSHOT = ExperienceSnapshot(entries=tuple(LIBRARY))
QUERY = "Write the number of lines in rivers.txt to river_count.txt."


def test_the_snapshot_hash_is_part_of_the_contract_hash():
    with_lib = attach_snapshot(BASELINE, SNAPSHOT, revision="1.0.1", k=2)
    assert with_lib.resources.experience is not None
    assert with_lib.resources.experience.snapshot == SNAPSHOT.snapshot_id
    assert with_lib.experience_resource is not None and with_lib.experience_resource.sha256 == SNAPSHOT.snapshot_id
    smaller = attach_snapshot(BASELINE, ExperienceSnapshot(entries=tuple(LIBRARY[:3])), revision="1.0.1", k=2)
    other_k = attach_snapshot(BASELINE, SNAPSHOT, revision="1.0.1", k=4)
    hashes = {BASELINE.content_hash, with_lib.content_hash, smaller.content_hash, other_k.content_hash}
    assert len(hashes) == 4
    # round trip: the contract alone reproduces the snapshot
    again = loads_contract(dump_contract(with_lib))
    assert again.content_hash == with_lib.content_hash
    snap = contract_snapshot(again)
    assert snap is not None and snap.snapshot_id == SNAPSHOT.snapshot_id


def test_a_contract_whose_snapshot_does_not_match_is_refused():
    with_lib = attach_snapshot(BASELINE, SNAPSHOT, revision="1.0.1")
    text = dump_contract(with_lib).replace(SNAPSHOT.snapshot_id, "0" * 64, 1)
    with pytest.raises(ContractError, match=r"resources\.experience\.snapshot|sha256"):
        loads_contract(text)
    with pytest.raises(ContractError, match="not one of"):
        attach_snapshot(BASELINE, SNAPSHOT, revision="1.0.1", k=3)


def test_a_trial_is_shown_the_k_nearest_entries_of_other_tasks():
    contract = attach_snapshot(BASELINE, SNAPSHOT, revision="1.0.1", k=2)
    shown = shown_entries(contract, instruction=QUERY, task_id="rivers", task_hash="h-rivers")
    assert len(shown) == 2 and shown[0].task_id == "count-lines"
    own = shown_entries(contract, instruction=QUERY, task_id="count-lines", task_hash="h-count-lines")
    assert "count-lines" not in [e.task_id for e in own]
    assert shown_entries(BASELINE, instruction=QUERY, task_id="x", task_hash="y") == []
    oracle_only = attach_snapshot(BASELINE, SNAPSHOT, revision="1.0.1", k=8, provenance="oracle")
    assert {str(e.provenance) for e in shown_entries(oracle_only, instruction=QUERY, task_id="x", task_hash="y")} == {
        "oracle"
    }
    messages = render_examples(contract, [e.to_example() for e in shown])
    users = [m["content"] for m in messages if m["role"] == "user" and "Write" in m["content"]]
    assert users[-1].endswith(shown[0].instruction)  # the best entry is shown last, nearest the task


def test_the_command_format_shows_no_multi_line_entry():
    multi = entry("heredoc", "Write the number of lines to a file.", ["cat > f <<'X'\nlines\nX"])
    snap = ExperienceSnapshot(entries=(*LIBRARY, multi))
    command = derive(BASELINE, revision="1.0.1", edit="command", changes={
        "tools.action_format": "command", "tools.allow": ["bash", "finish"]})
    contract = attach_snapshot(command, snap, revision="1.0.2", k=8)
    assert multi.entry_id not in [e.entry_id for e in shown_entries(contract, instruction=QUERY, task_id="x",
                                                                    task_hash="y")]


def test_atif_names_the_entries_shown():
    contract = attach_snapshot(BASELINE, SNAPSHOT, revision="1.0.1", k=2)
    ids = [LIBRARY[3].entry_id, LIBRARY[0].entry_id]
    events = [
        {"event": "experience", "ts": "2026-12-01T00:00:00+00:00", "snapshot": SNAPSHOT.snapshot_id, "entries": ids},
        {"event": "request", "ts": "2026-12-01T00:00:00+00:00", "messages": [{"role": "user", "content": "hi"}]},
        {"event": "end", "ts": "2026-12-01T00:00:01+00:00"},
    ]
    extra = transcript_to_atif(events, contract=contract, task_id="rivers").extra["mindforge"]
    assert extra["experience_entries"] == ids and extra["experience_snapshot"] == SNAPSHOT.snapshot_id


def test_hcp_show_and_diff_name_the_snapshot(tmp_path: Path):
    base_path = save_contract(BASELINE, tmp_path / "a.toml")
    with_lib = save_contract(attach_snapshot(BASELINE, SNAPSHOT, revision="1.0.1", k=2), tmp_path / "b.toml")
    runner = CliRunner()
    shown = runner.invoke(app, ["hcp", "show", str(with_lib)])
    assert shown.exit_code == 0, shown.output
    assert SNAPSHOT.snapshot_id[:16] in shown.output and "4 entries" in shown.output and "k=2" in shown.output
    as_json = json.loads(runner.invoke(app, ["hcp", "show", "--json", str(with_lib)]).output)
    assert as_json["experience"]["snapshot"] == SNAPSHOT.snapshot_id and as_json["experience"]["k"] == 2
    diff = runner.invoke(app, ["hcp", "diff", str(base_path), str(with_lib)])
    assert diff.exit_code == 0, diff.output
    assert f"~ experience: none -> snapshot {SNAPSHOT.snapshot_id[:16]}" in diff.output
    assert '"entries": [' not in diff.output  # the snapshot's JSON itself is summarised, not printed
