"""Proposal prompt rendering and strict parsing of replies (no Docker, no endpoint)."""

from __future__ import annotations

import copy
import json

import pytest

from mindforge.discovery.proposal import (
    PoolSummary,
    TaskHead,
    instruction_head,
    parse_proposals,
    render_proposal_prompt,
    summarise_pool,
)
from mindforge.discovery.records import RejectReason
from mindforge.discovery.schema import ProposalRules, TaskProposal, dockerfile_problem
from mindforge.hcp import load_contract
from mindforge.settings import REPO_ROOT
from mindforge.tasks.loader import load_tasks
from tests.unit.discovery.sample_proposals import BROKEN, VALID, reply

CONTRACT = REPO_ROOT / "hcp_contracts" / "baseline.toml"


def _one(item: dict, **kw):
    outcomes = parse_proposals(reply(item), k=kw.pop("k", 3), **kw)
    assert len(outcomes) == 1
    return outcomes[0]


def test_valid_reply_parses_into_proposals():
    outcomes = parse_proposals(reply(VALID, BROKEN), k=2)
    assert [o.reason for o in outcomes] == [None, None]
    assert [o.task_id for o in outcomes] == ["region-totals", "reverse-poem-lines"]
    prop = outcomes[0].proposal
    assert isinstance(prop, TaskProposal)
    assert prop.files == VALID["files"]
    assert set(prop.all_files()) == {
        "instruction.md", "environment/Dockerfile", "environment/data/sales.csv",
        "tests/test.sh", "tests/test_outputs.py", "solution/solve.sh",
    }


def test_a_reply_in_one_fenced_block_is_read():
    outcomes = parse_proposals("```json\n" + reply(VALID) + "\n```", k=1)
    assert outcomes[0].proposal is not None


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("Here are my tasks: " + reply(VALID), "not JSON"),
        ("", "empty reply"),
        (json.dumps([VALID]), "single key 'tasks'"),
        (json.dumps({"tasks": [VALID], "notes": "x"}), "single key 'tasks'"),
        (json.dumps({"tasks": []}), "non-empty list"),
        (json.dumps({"tasks": VALID}), "non-empty list"),
    ],
)
def test_unusable_replies_are_rejected_as_a_whole(text, needle):
    outcomes = parse_proposals(text, k=2)
    assert len(outcomes) == 1
    assert outcomes[0].index == -1 and outcomes[0].reason == RejectReason.MALFORMED
    assert needle in outcomes[0].detail


def _without(key: str) -> dict:
    item = copy.deepcopy(VALID)
    del item[key]
    return item


@pytest.mark.parametrize(
    ("item", "needle"),
    [
        (_without("solve_sh"), "tasks[0].solve_sh: Field required"),
        (_without("files"), "tasks[0].files: Field required"),
        ({**VALID, "notes": "hi"}, "tasks[0].notes: Extra inputs are not permitted"),
        ({**VALID, "files": {"../x": "a"}}, "escapes the workspace"),
        ({**VALID, "files": {"/etc/passwd": "a"}}, "is absolute"),
        ({**VALID, "files": {"./data/x": "a"}}, "not normalised"),
        ({**VALID, "files": {"Dockerfile": "FROM x"}}, "written from its own field"),
        ({**VALID, "files": {"data": "a", "data/b": "c"}}, "both a file and the folder"),
        ({**VALID, "test_files": {"test.sh": "exit 0"}}, "written from its own field"),
        ({**VALID, "dockerfile": "FROM ubuntu:24.04\nRUN true\n"}, "not an allowed base"),
        ({**VALID, "dockerfile": "RUN true\nFROM mindforge/base:bookworm\n"}, "first instruction must be FROM"),
        ({**VALID, "dockerfile": "FROM --platform=linux/arm64 mindforge/base:bookworm\n"}, "flags"),
        ({**VALID, "dockerfile": "ARG B=x\nFROM $B\n"}, "uses a variable"),
        ({**VALID, "task_id": "Bad_ID"}, "is not a task id"),
        ({**VALID, "difficulty": "trivial"}, "tasks[0].difficulty"),
        ({**VALID, "files": {"a.txt": 3}}, "tasks[0].files.a.txt: Input should be a valid string"),
        ({**VALID, "instruction": "   \n"}, "blank text"),
        ({**VALID, "files": {"big.txt": "x" * (64 * 1024 + 1)}}, "over the per-file limit"),
    ],
)
def test_malformed_proposals_are_rejected_with_the_reason(item, needle):
    out = _one(item)
    assert out.reason == RejectReason.MALFORMED and out.proposal is None
    assert needle in out.detail, out.detail


def test_limits_come_from_the_rules():
    rules = ProposalRules(max_total_bytes=200, allowed_bases=("mindforge/base:bookworm", "debian:bookworm"))
    assert "over the limit of 200 bytes" in _one(VALID, rules=rules).detail
    rules = ProposalRules(allowed_bases=("debian:bookworm",))
    item = {
        **VALID,
        "dockerfile": "FROM docker.io/library/debian:bookworm AS build\nFROM build\nCOPY data/ /app/data/\n",
    }
    assert _one(item, rules=rules).proposal is not None


def test_a_bad_item_does_not_sink_the_others_and_extras_are_refused():
    bad = {**BROKEN, "files": {"../x": "y"}}
    outcomes = parse_proposals(reply(VALID, bad, {**VALID, "task_id": "third-task"}), k=2)
    assert [o.reason for o in outcomes] == [None, RejectReason.MALFORMED, RejectReason.MALFORMED]
    assert outcomes[1].task_id == "reverse-poem-lines"
    assert "only 2 tasks were asked for" in outcomes[2].detail


def test_repeated_task_ids_are_refused():
    outcomes = parse_proposals(reply(VALID, VALID), k=2)
    assert outcomes[0].reason is None
    assert outcomes[1].reason == RejectReason.MALFORMED and "repeated" in outcomes[1].detail


def test_dockerfile_problem_accepts_comments_args_and_stage_aliases():
    text = "# syntax\nARG X=1\nFROM mindforge/base:bookworm AS base\nRUN pip install x\nFROM base\n"
    assert dockerfile_problem(text, ("mindforge/base:bookworm",)) is None
    assert dockerfile_problem("# nothing\n", ("mindforge/base:bookworm",)) == "no FROM instruction"


def test_prompt_carries_the_contract_text_the_pool_and_the_format():
    contract = load_contract(CONTRACT)
    tasks = load_tasks([REPO_ROOT / "tasks"])
    solved, failed = tasks[0].id, tasks[1].id
    summary = summarise_pool(
        tasks, solved=[solved], failed=[failed], failure_classes={"max_turns": 3, "task_failed": 5}
    )
    messages = render_proposal_prompt(contract, summary, 3)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == contract.prompts.discovery
    user = messages[1]["content"]
    assert "Propose exactly 3 new tasks" in user
    assert f"Tasks the agent solves (1):\n- {solved} [" in user
    assert f"Tasks the agent fails (1):\n- {failed} [" in user
    assert f"Tasks not tried yet ({len(tasks) - 2})" in user
    assert "Failure classes in the last audit: task_failed 5, max_turns 3" in user
    assert '{"tasks": [{"task_id"' in user and "mindforge/base:bookworm" in user
    assert sum(summary.categories.values()) == len(tasks)


def test_prompt_truncates_long_lists_and_rejects_k_below_one():
    heads = [TaskHead(task_id=f"t{i}", category="c", head="h") for i in range(20)]
    messages = render_proposal_prompt(load_contract(CONTRACT), PoolSummary(solved=heads), 1, max_examples=5)
    assert "- ... and 15 more" in messages[1]["content"]
    assert "Propose exactly 1 new task," in messages[1]["content"]
    with pytest.raises(ValueError):
        render_proposal_prompt(load_contract(CONTRACT), PoolSummary(), 0)


def test_the_reply_format_example_parses():
    """The example in the prompt's format block must itself be a well-formed reply (modulo the '...')."""
    from mindforge.discovery.proposal import _reply_format

    text = _reply_format(ProposalRules())
    start, end = text.index('{"tasks"'), text.index("]}") + 2
    data = json.loads(text[start:end])
    outcomes = parse_proposals(json.dumps(data), k=1)
    assert outcomes[0].reason is None, outcomes[0].detail


def test_instruction_head():
    assert instruction_head("\n\n# Fix the `build`\nmore") == "Fix the build"
    assert instruction_head("> Write **/app/out_file.csv**") == "Write /app/out_file.csv"
    assert len(instruction_head("word " * 100)) == 160
