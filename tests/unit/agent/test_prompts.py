"""What the model is shown: system prompt, worked examples as few-shot turns and observations, per action format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mindforge.agent.actions import parse_reply
from mindforge.agent.prompts import (
    NO_OUTPUT,
    format_bash_observation,
    format_exec,
    observation_message,
    render_examples,
    render_system_prompt,
)
from mindforge.hcp import derive, load_contract
from mindforge.sandbox.base import ExecResult
from tests.fixtures.examples import COUNT_LINES, GREP_TO_FILE

REPO = Path(__file__).resolve().parents[3]
BASELINE = load_contract(REPO / "hcp_contracts" / "baseline.toml")
EXAMPLES = [COUNT_LINES, GREP_TO_FILE]


def contract(fmt: str, *, examples=EXAMPLES, mode: str = "multi_turn", **changes):
    allow = ["bash", "finish"] if fmt in ("command", "fenced_bash") else list(BASELINE.tools.allow)
    return derive(
        BASELINE,
        name="t",
        revision=f"1-{fmt}-{mode}",
        edit="test",
        changes={
            "tools.action_format": fmt,
            "tools.allow": allow,
            "resources.examples": list(examples),
            "workspace.mode": mode,
            **changes,
        },
    )


def test_the_system_prompt_describes_each_format_and_mode():
    assert '{"tool": "<name>"' in render_system_prompt(contract("json"), [])
    fenced = render_system_prompt(contract("fenced_bash"), [])
    assert "```bash" in fenced and "reply with: done" in fenced
    command = render_system_prompt(contract("command"), [])
    assert "exactly one shell command line" in command and "reply with: done" in command
    single = render_system_prompt(contract("command", mode="single_command"), [])
    assert "exactly one command" in single and "reply with: done" not in single
    assert "calling the provided tools" in render_system_prompt(contract("tool_calls"), [])


@pytest.mark.parametrize("fmt", ["json", "tool_calls", "fenced_bash", "command"])
def test_examples_become_turns_that_parse_in_their_own_format(fmt):
    c = contract(fmt)
    messages = render_examples(c)
    users = [m for m in messages if m["role"] == "user" and "Your task:" in m["content"]]
    assert [u["content"].split("\n\n", 1)[1] for u in users] == [e.instruction for e in EXAMPLES]
    assistants = [m for m in messages if m["role"] == "assistant"]
    assert len(assistants) == sum(len(e.steps) for e in EXAMPLES) + len(EXAMPLES)  # each step, then finish
    parsed = [parse_reply(fmt, m["content"], m.get("tool_calls", []), list(c.tools.allow), "x") for m in assistants]
    commands = [a.arguments["command"] for a in parsed if a.tool == "bash"]
    assert commands == [s.command for e in EXAMPLES for s in e.steps]
    assert [a.tool for a in parsed].count("finish") == len(EXAMPLES)
    # every step's output comes back as the live loop would show it
    assert any("8" in (m["content"] or "") for m in messages if m["role"] in ("user", "tool"))
    if fmt == "tool_calls":  # each native call is answered by a tool message with its id
        ids = [call["id"] for m in assistants for call in m["tool_calls"]]
        assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == ids


def test_command_examples_read_like_a_terminal():
    messages = render_examples(contract("command", examples=EXAMPLES[:1]))
    assert [m["content"] for m in messages[1:]] == [
        "wc -l < planets.txt > planet_count.txt",
        "[exit code 0]",
        "cat planet_count.txt",
        "8\n[exit code 0]",
        "done",
    ]
    terse = contract("command", examples=EXAMPLES[:1], **{"tools.show_exit_code": False})
    assert [m["content"] for m in render_examples(terse)[1:]][1:4] == [NO_OUTPUT, "cat planet_count.txt", "8"]


def test_single_command_examples_are_one_action_without_observations():
    messages = render_examples(contract("command", mode="single_command"))
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[1]["content"] == "wc -l < planets.txt > planet_count.txt && cat planet_count.txt"
    fenced = render_examples(contract("fenced_bash", mode="single_command"))
    assert fenced[3]["content"] == "```bash\ngrep basil recipes.txt > basil.txt && cat basil.txt\n```"


@pytest.mark.parametrize("fmt", ["json", "fenced_bash", "command"])
def test_compact_examples_are_one_action_each_and_shorter(fmt):
    """``resources.example_style = "compact"``: a multi-turn contract shows each example as one joined action."""
    turns, compact = contract(fmt), contract(fmt, **{"resources.example_style": "compact"})
    messages = render_examples(compact)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    action = parse_reply(fmt, messages[1]["content"], [], list(compact.tools.allow), "x")
    assert action.arguments["command"] == "wc -l < planets.txt > planet_count.txt && cat planet_count.txt"
    assert sum(len(m["content"]) for m in messages) < sum(len(m["content"] or "") for m in render_examples(turns))
    assert compact.content_hash != turns.content_hash


def test_the_default_example_style_leaves_the_document_and_hash_alone():
    """A contract written before ``example_style`` existed hashes as it did: the default is left out."""
    assert "example_style" not in BASELINE.to_document()["resources"]
    explicit = derive(BASELINE, name="t", revision="2", edit="x", changes={"resources.example_style": "turns"})
    implicit = derive(BASELINE, name="t", revision="2", edit="x", changes={})
    assert explicit.to_document()["resources"] == implicit.to_document()["resources"]


def test_no_examples_no_turns():
    assert render_examples(BASELINE) == []


def test_an_example_change_changes_the_contract_hash():
    one = contract("command", examples=EXAMPLES[:1])
    changed = EXAMPLES[0].model_copy(update={"instruction": EXAMPLES[0].instruction + " Be quick."})
    other = contract("command", examples=[changed])
    assert one.content_hash != other.content_hash
    assert contract("command", examples=EXAMPLES[:1]).content_hash == one.content_hash
    assert render_examples(one) != render_examples(other)


def test_observation_styles():
    res = ExecResult(exit_code=1, stdout="out\n", stderr="err\n")
    assert format_exec(res, "full") == "exit code 1\nstdout:\nout\n\nstderr:\nerr\n"  # unchanged labelled style
    assert format_exec(res, "full", plain=True) == "out\nerr\n[exit code 1]"
    assert format_exec(res, "none", plain=True) == "[exit code 1]"
    assert format_exec(res, "full", show_exit_code=False) == "stdout:\nout\n\nstderr:\nerr\n"
    assert format_exec(ExecResult(exit_code=0), "tail", show_exit_code=False) == NO_OUTPUT
    timed = ExecResult(exit_code=None, timed_out=True)
    assert format_exec(timed, "tail", plain=True, show_exit_code=False) == "[command timed out (killed)]"
    assert format_bash_observation(contract("json"), res).startswith("exit code 1\nstdout:")
    assert format_bash_observation(contract("command"), res) == "out\nerr\n[exit code 1]"


@pytest.mark.parametrize(
    ("fmt", "role", "content"),
    [("json", "user", "Observation from bash:\nhi"), ("fenced_bash", "user", "Output:\nhi"), ("command", "user", "hi")],
)
def test_observation_messages_per_format(fmt, role, content):
    assert observation_message(contract(fmt), "bash", "hi") == {"role": role, "content": content}
    native = observation_message(contract("tool_calls"), "bash", "hi", "call_1")
    assert native == {"role": "tool", "tool_call_id": "call_1", "content": "hi"}


def test_json_example_turns_are_json_actions():
    first = render_examples(contract("json", examples=EXAMPLES[:1]))[1]
    assert json.loads(first["content"]) == {"tool": "bash", "arguments": {"command": EXAMPLES[0].steps[0].command}}
