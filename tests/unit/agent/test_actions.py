"""Action parsing for the four action formats: strict, with a reason for every rejection."""

import pytest

from mindforge.agent.actions import (
    ActionParseError,
    action_schema,
    parse_command,
    parse_fenced_bash,
    parse_json_action,
    parse_reply,
    parse_tool_call,
    tool_schemas,
)

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


SHELL = ["bash", "finish"]


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("ls -la", "ls -la"),
        ("$ ls -la\nand then I would check", "ls -la"),
        ("`wc -l < notes.txt`", "wc -l < notes.txt"),
        ("\n\n   grep -c WARN app.log  \n", "grep -c WARN app.log"),
        ("```bash\nsort -u names.txt\n```", "sort -u names.txt"),
    ],
)
def test_command_format_takes_the_first_command_line(text, command):
    action = parse_command(text, SHELL, call_id="c1")
    assert (action.tool, action.arguments, action.call_id) == ("bash", {"command": command}, "c1")


@pytest.mark.parametrize("text", ["done", "Done.", "  exit\n", "DONE"])
def test_command_format_done_or_exit_is_finish(text):
    assert parse_command(text, SHELL).tool == "finish"
    # without finish allowed the word is just a command
    assert parse_command(text, ["bash"]).tool == "bash"


@pytest.mark.parametrize("text", ["   \n  ", "```\n```", "$"])
def test_command_format_errors(text):
    with pytest.raises(ActionParseError, match="no command"):
        parse_command(text, SHELL)


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("```bash\nls -l\n```", "ls -l"),
        ("I will look.\n```sh\ncd /tmp\nls\n```\nThat lists it.", "cd /tmp\nls"),
        ("```python\nprint(1)\n```\nnow in the shell:\n```shell\necho a\n```", "echo a"),
        ("```\npwd\n```", "pwd"),
        ("```bash\necho cut by a stop sequence", "echo cut by a stop sequence"),
        ("```bash tar -tzf a.tar.gz```", "tar -tzf a.tar.gz"),
    ],
)
def test_fenced_bash_takes_the_first_shell_block(text, command):
    action = parse_fenced_bash(text, SHELL)
    assert (action.tool, action.arguments) == ("bash", {"command": command})


def test_fenced_bash_finish_and_errors():
    assert parse_fenced_bash("done", SHELL).tool == "finish"
    assert parse_fenced_bash("```bash\ndone\n```", SHELL).tool == "finish"
    for text, fragment in [
        ("I would run ls -la", "no ```bash block"),
        ("```python\nprint(1)\n```", "no ```bash block"),
        ("```bash\n\n```", "block is empty"),
        ("done", "no ```bash block"),
    ]:
        allowed = ["bash"] if text == "done" else SHELL
        with pytest.raises(ActionParseError, match=fragment):
            parse_fenced_bash(text, allowed)


def test_parse_reply_dispatches_on_the_format():
    assert parse_reply("command", "ls", [], SHELL, "c").arguments == {"command": "ls"}
    assert parse_reply("fenced_bash", "```bash\nls\n```", [], SHELL, "c").arguments == {"command": "ls"}
    assert parse_reply("json", '{"tool": "finish"}', [], ALLOWED, "c").tool == "finish"
    calls = [{"id": "n1", "type": "function", "function": {"name": "finish", "arguments": "{}"}}]
    assert parse_reply("tool_calls", "", calls, ALLOWED, "c").call_id == "n1"
    with pytest.raises(ActionParseError, match="no JSON action"):
        parse_reply("json", "ls -la", [], ALLOWED, "c")  # a bare command is not a JSON action
    with pytest.raises(ValueError, match="unknown action format"):
        parse_reply("xml", "<ls/>", [], ALLOWED, "c")


def test_action_schema_has_one_branch_per_allowed_tool():
    schema = action_schema(["bash", "write_file", "finish"])
    branches = {b["properties"]["tool"]["const"]: b["properties"]["arguments"] for b in schema["anyOf"]}
    assert list(branches) == ["bash", "write_file", "finish"]
    assert branches["bash"]["required"] == ["command"] and branches["finish"]["required"] == []
    assert set(branches["write_file"]["properties"]) == {"path", "content"}
    assert all(b["additionalProperties"] is False for b in schema["anyOf"])


def test_a_command_string_with_a_raw_newline_parses():
    # a grammar-constrained reply may carry a raw newline inside the command string
    action = parse_json_action('{"arguments": {"command": "cd /app\nls"}, "tool": "bash"}', ALLOWED)
    assert action.arguments == {"command": "cd /app\nls"}
