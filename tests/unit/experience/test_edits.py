"""Search edits over experience: retrieval k in {0, 1, 2, 4, 8} and the move to the latest validated snapshot."""

from __future__ import annotations

import pytest

from mindforge.experience import ExperienceSnapshot, attach_snapshot
from mindforge.hcp import load_contract
from mindforge.search.candidates import apply_edit
from mindforge.search.edits import Edit, edit_changes, operator_edits, snapshot_edit
from tests.conftest import REPO
from tests.unit.experience.helpers import LIBRARY

BASELINE = load_contract(REPO / "hcp_contracts" / "baseline.toml")
OLD = ExperienceSnapshot(entries=tuple(LIBRARY[:3]))
LATEST = ExperienceSnapshot(entries=tuple(LIBRARY))


def _experience_edits(edits: list[Edit]) -> list[str]:
    return [e.key for e in edits if e.op.startswith("experience")]


def test_a_contract_without_experience_gets_only_the_move_to_the_snapshot():
    assert _experience_edits(operator_edits(BASELINE)) == []
    edits = operator_edits(BASELINE, snapshot_json=LATEST.to_json())
    assert [e.op for e in edits if e.op.startswith("experience")] == ["experience_snapshot"]
    child = apply_edit(BASELINE, snapshot_edit(LATEST.to_json()))
    assert child.resources.experience is not None and child.resources.experience.snapshot == LATEST.snapshot_id
    assert child.content_hash != BASELINE.content_hash


def test_k_edits_and_the_move_to_a_newer_snapshot():
    contract = attach_snapshot(BASELINE, OLD, revision="1.0.1", k=4)
    keys = _experience_edits(operator_edits(contract, snapshot_json=LATEST.to_json()))
    assert keys[:4] == ["experience_k=0", "experience_k=1", "experience_k=2", "experience_k=8"]
    assert keys[4].startswith("experience_snapshot=")
    # already on the latest snapshot: no move offered
    assert not any(k.startswith("experience_snapshot") for k in _experience_edits(
        operator_edits(contract, snapshot_json=OLD.to_json())))
    moved = apply_edit(contract, snapshot_edit(LATEST.to_json()))
    assert moved.resources.experience is not None
    assert moved.resources.experience.snapshot == LATEST.snapshot_id and moved.resources.experience.k == 4
    eight = apply_edit(contract, Edit(op="experience_k", value=8))
    assert eight.resources.experience is not None and eight.resources.experience.k == 8
    with pytest.raises(ValueError):
        edit_changes(contract, Edit(op="experience_k", value=3))
    with pytest.raises(ValueError):
        edit_changes(BASELINE, Edit(op="experience_k", value=2))
