"""Candidate contracts: operator edits, recorded edits and diffs, dedupe, and no task limits touched."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from pydantic import ValidationError

from mindforge.hcp import diff_contracts, flatten, load_contract
from mindforge.hcp.derive import _TASK_LIMIT_KEYS
from mindforge.search import (
    CandidateError,
    CandidatePool,
    Edit,
    candidate_diff,
    compose_edits,
    edit_changes,
    make_candidate,
    materialize_chain,
    operator_edits,
    skill_library,
)

REPO = Path(__file__).resolve().parents[3]
ROOT = load_contract(REPO / "hcp_contracts" / "baseline.toml")


def test_operator_edits_cover_the_search_space() -> None:
    keys = {e.key for e in operator_edits(ROOT)}
    expected = {
        "remove_tool=read_file", "hook_on=plan_first", "hook_on=verify_before_finish", "on_command_error=full",
        "on_command_error=none", "add_skill=run_tests.sh", "add_skill=show_tree.sh", "add_skill=find_files.sh",
        "max_observation_bytes=65536", "max_observation_bytes=4096", "bash_timeout_sec=120.0", "bash_timeout_sec=30.0",
        "max_turns=60", "max_turns=15", "max_tokens=4096", "temperature=0.0", "top_p=1.0", "action_format=tool_calls",
    }  # fmt: skip
    assert expected <= keys
    assert "remove_tool=bash" not in keys and "remove_tool=finish" not in keys
    narrow = make_candidate(ROOT, [Edit(op="remove_tool", value="read_file")], origin="operator", step=0)
    child = materialize_chain(ROOT, narrow.edits)[-1]
    assert "add_tool=read_file" in {e.key for e in operator_edits(child)}


def test_every_child_records_parent_edit_and_diff_and_no_task_limit() -> None:
    for edit in operator_edits(ROOT):
        cand = make_candidate(ROOT, [edit], origin="operator", step=0)
        child = materialize_chain(ROOT, cand.edits)[-1]
        assert child.mindforge.parent == ROOT.ref and cand.parent_hash == ROOT.content_hash
        assert child.mindforge.edit == edit.describe(ROOT) and child.mindforge.edit
        assert child.content_hash == cand.contract_hash
        diff = candidate_diff(ROOT, cand)
        changed = [c.key for c in diff_contracts(ROOT, child, include_identity=False)]
        assert diff and changed
        for key in changed:
            assert key.split("[")[0].split(".")[-1] not in _TASK_LIMIT_KEYS, key
            assert key.split(".")[0] in {
                "tools",
                "hooks",
                "resources",
                "skills",
                "workspace",
                "model",
                "provider_options",
            }


def test_task_limits_cannot_even_be_expressed_as_edits() -> None:
    for op in ("timeout_sec", "agent_timeout_sec", "memory_mb", "cpus"):
        with pytest.raises(ValidationError):
            Edit(op=op, value=10)


def test_skills_come_from_the_shipped_library_with_their_sha256() -> None:
    library = skill_library()
    assert {"show_tree.sh", "find_files.sh", "run_tests.sh", "show_lines.sh"} <= set(library)
    cand = make_candidate(ROOT, [Edit(op="add_skill", value="run_tests.sh")], origin="operator", step=0)
    child = materialize_chain(ROOT, cand.edits)[-1]
    resource = child.resources.resource("skills/run_tests.sh")
    assert child.skills.paths == ["skills/run_tests.sh"]
    assert resource.data.decode() == library["run_tests.sh"]
    assert resource.sha256 == hashlib.sha256(library["run_tests.sh"].encode()).hexdigest()
    with pytest.raises(ValueError, match="no skill"):
        edit_changes(ROOT, Edit(op="add_skill", value="rm_rf.sh"))


def test_near_duplicates_are_one_candidate() -> None:
    plan, full = Edit(op="hook_on", value="plan_first"), Edit(op="on_command_error", value="full")
    pool = CandidatePool(ROOT)
    a = make_candidate(ROOT, [plan, full], origin="compose", step=1)
    b = make_candidate(ROOT, [full, plan], origin="compose", step=1)
    assert a.contract_hash != b.contract_hash  # different parents along the way...
    assert a.harness_hash == b.harness_hash  # ...same resulting harness
    assert pool.add(a) is True
    assert pool.add(b) is False and pool.duplicate_of(b) == 0
    assert pool.add(make_candidate(ROOT, [plan, full], origin="compose", step=2)) is False  # same hash
    assert len(pool.items) == 1
    # the same chain always materialises to the same contract
    assert make_candidate(ROOT, [plan], origin="operator", step=0) == make_candidate(
        ROOT, [plan], origin="operator", step=0
    )


def test_no_op_and_conflicting_edits_are_refused() -> None:
    with pytest.raises(CandidateError, match="already"):
        make_candidate(
            ROOT, [Edit(op="temperature", value=ROOT.provider_options.temperature)], origin="operator", step=0
        )
    with pytest.raises(CandidateError, match="changes nothing"):
        make_candidate(ROOT, [Edit(op="hook_off", value="plan_first")], origin="operator", step=0)
    with pytest.raises(CandidateError, match="same thing twice"):
        make_candidate(
            ROOT, [Edit(op="temperature", value=0.0), Edit(op="temperature", value=1.0)], origin="compose", step=0
        )
    with pytest.raises(CandidateError, match="conflict"):
        compose_edits([Edit(op="max_turns", value=60)], [Edit(op="max_turns", value=15)])
    with pytest.raises(CandidateError, match="adds nothing"):
        compose_edits([Edit(op="max_turns", value=60)], [Edit(op="max_turns", value=60)])


def test_composed_chain_registers_parent_first() -> None:
    edits = [Edit(op="hook_on", value="plan_first"), Edit(op="add_skill", value="show_tree.sh")]
    chain = materialize_chain(ROOT, edits)
    cand = make_candidate(ROOT, edits, origin="compose", step=3)
    assert chain[0].mindforge.parent == ROOT.ref and chain[1].mindforge.parent == chain[0].ref
    assert cand.parent_hash == chain[0].content_hash
    diff = candidate_diff(ROOT, cand)  # against the parent: only the skill, not the hook
    assert '~ skills.paths: [] -> ["skills/show_tree.sh"]' in diff and "plan_first" not in diff
    changed = set(flatten(chain[1].to_document())) ^ set(flatten(ROOT.to_document()))
    assert "resources.embedded[0].sha256" in changed


def test_prompt_edits_append_to_the_system_prompt() -> None:
    text = "Before finishing, run the task's own checks and read their output."
    cand = make_candidate(ROOT, [Edit(op="append_prompt", value=text)], origin="model", step=0)
    child = materialize_chain(ROOT, cand.edits)[-1]
    assert child.resources.append_system_prompt.endswith(text)
    assert cand.edits[0].key.startswith("append_prompt=") and len(cand.edits[0].key) == len("append_prompt=") + 12
