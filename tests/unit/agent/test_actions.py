"""Action parsing for both action formats: strict, with a reason for every rejection."""

import pytest

from mindforge.agent.actions import ActionParseError, parse_json_action, parse_tool_call, tool_schemas

ALLOWED = ["bash", "read_file", "write_file", "finish"]


@pytest.mark.parametrize(
    "text",
    [
        '{"tool": "bash", "arguments": {"command": "ls -la"}}',
        'I will list files.\n```json\n{"tool": "bash", "arguments": {"command": "ls -la"}}\n```',
        'Sure: {"tool": "bash", "args": {"command": "ls -la"}} done',
    ],
)
def test_json_action_forms(text):
    action = parse_json_action(text, ALLOWED)
    assert action.tool == "bash"
    assert action.arguments == {"command": "ls -la"}


@pytest.mark.parametrize(
    ("text", "allowed", "fragment"),
    [
        ("just some prose", ALLOWED, "no JSON action"),
        ('{"tool": "python", "arguments": {}}', ALLOWED, "not available"),
        ('{"tool": "bash", "arguments": {}}', ALLOWED, "needs argument 'command'"),
        ('{"tool": "bash", "arguments": {"command": 5}}', ALLOWED, "must be a string"),
        ('{"tool": "write_file", "arguments": {"path": "a"}}', ["write_file"], "needs argument 'content'"),
        ('{"tool": "read_file", "arguments": {"path": "a"}}', ["bash", "finish"], "not available"),
    ],
)
def test_json_action_errors(text, allowed, fragment):
    with pytest.raises(ActionParseError, match=fragment):
        parse_json_action(text, allowed)


def test_native_tool_call():
    calls = [{"id": "c1", "type": "function", "function": {"name": "finish", "arguments": "{}"}}]
    action = parse_tool_call(calls, ALLOWED)
    assert (action.tool, action.call_id) == ("finish", "c1")
    with pytest.raises(ActionParseError, match="no tool call"):
        parse_tool_call([], ALLOWED)
    bad = [{"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "{oops"}}]
    with pytest.raises(ActionParseError, match="not valid JSON"):
        parse_tool_call(bad, ALLOWED)


def test_tool_schemas_cover_allowed_tools():
    names = [s["function"]["name"] for s in tool_schemas(["bash", "finish"])]
    assert names == ["bash", "finish"]
