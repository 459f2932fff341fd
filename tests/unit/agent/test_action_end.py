"""Where a reply's first action ends (``action_end``): the engine stops there, the parser takes the same action.

The property every format must hold, checked on hand-picked replies and on replies built
by hypothesis from fragments: for every cut ``k`` of a reply at which ``action_end``
already says the action is complete, the parser takes the same action (or refuses it
with the same error) from ``reply[:k]`` as from the whole reply. A reply whose action
never completes short of its end has no end (the engine runs it to EOS or the cap).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindforge.agent.actions import ActionParseError, action_end, parse_reply
from mindforge.policy.engines.completion import action_complete
from mindforge.policy.server.protocol import parse_tool_calls, tool_call_end

ALLOWED = ["bash", "read_file", "write_file", "finish"]
FORMATS = ["json", "fenced_bash", "command"]


def parsed(fmt: str, text: str) -> tuple[str, ...]:
    """The action a reply parses to, or the parse error's message: what must not change."""
    try:
        action = parse_reply(fmt, text, [], ALLOWED, "c")
    except ActionParseError as exc:
        return ("error", str(exc))
    return (action.tool, repr(sorted(action.arguments.items())))


def assert_cuts_keep_the_action(fmt: str, text: str) -> int | None:
    """Every complete cut parses as the whole reply; returns the first cut at which the action is complete."""
    first = None
    for k in range(len(text) + 1):
        if action_end(fmt, text[:k]) is not None:
            first = k if first is None else first
            assert parsed(fmt, text[:k]) == parsed(fmt, text), (fmt, text, k)
    return first


@pytest.mark.parametrize(
    ("fmt", "text", "stop_after"),
    [
        ("json", '{"tool": "bash", "arguments": {"command": "ls"}} and then more words', '"ls"}}'),
        ("json", 'I will list.\n```json\n{"tool": "finish", "arguments": {}}\n```\nDone.', '{}}'),
        ("json", '{"plan": 1} {"tool": "bash", "arguments": {"command": "pwd"}} {"tool": "finish"}', '"pwd"}}'),
        ("fenced_bash", "```bash\nls -la\n```\nThat lists the files.", "```bash\nls -la\n```"),
        ("fenced_bash", "```python\nprint(1)\n```\nthen\n```sh\necho a\n```\nok", "```sh\necho a\n```"),
        ("fenced_bash", "```bash tar -tzf a.tar.gz```\nmore", "a.tar.gz```\n"),
        ("command", "ls -la\nThis lists the files in long form.", "ls -la\n"),
        ("command", "```bash\nsort -u names.txt\n```", "sort -u names.txt\n"),
        ("command", "\n\n  $ wc -l notes.txt  \r\nnext", "notes.txt  \r"),
    ],
)
def test_replies_end_at_their_first_action(fmt, text, stop_after):
    first = assert_cuts_keep_the_action(fmt, text)
    assert first is not None and text[:first].endswith(stop_after), (text[:first], stop_after)
    assert action_complete(fmt, text[:first]) and not action_complete(fmt, text[: first - 1])


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        ("json", '{"tool": "bash", "arguments": {"command": "ls"'),  # the object never closes
        ("json", "no JSON here at all"),
        ("json", '{"answer": 42}'),  # an object, but no action
        ("fenced_bash", "```bash\necho still inside the block"),
        ("fenced_bash", "done"),  # the whole reply is the finish action: only the end of the reply says so
        ("command", "ls -la"),  # the line has not ended
        ("command", "```bash\n```\n"),
    ],
)
def test_a_reply_with_no_complete_action_has_no_end(fmt, text):
    assert action_end(fmt, text) is None
    assert_cuts_keep_the_action(fmt, text)


def test_an_action_inside_an_unclosed_object_is_the_first_to_end():
    """The rule is the first action object to *end*, so a reply cut there parses to it too."""
    text = '{"tool": "bash", "arguments": {"tool": "finish", "arguments": {}}, "x": 1}'
    assert parsed("json", text) == ("finish", "[]")
    assert assert_cuts_keep_the_action("json", text) == text.index("{}}") + 3


def test_tool_calls_end_after_the_first_valid_call():
    call = '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>'
    text = "thinking <tool_call>not json</tool_call> " + call + ' <tool_call>{"name": "finish"}</tool_call>'
    end = tool_call_end(text)
    assert end == text.index(call) + len(call)
    assert parse_tool_calls(text[:end])[1][0]["function"]["name"] == "bash"
    assert tool_call_end(text[: end - 1]) is None and action_complete("tool_calls", text[:end])
    assert not action_complete(None, text)


def test_an_unknown_format_is_refused():
    with pytest.raises(ValueError, match="no action end"):
        action_end("xml", "<ls/>")


FRAGMENTS = st.sampled_from(
    [
        "ls -la", "done", "```", "```bash", "```python", "```bash ls```", "\n", "\r\n", " ", "$ ", "`pwd`",
        '{"tool": "bash", "arguments": {"command": "ls"}}', '{"tool": "finish"}', '{"x": 1}', "{", "}",
        '{"tool": "bash", "arguments": {', '"command": "cat a"}}', "I will check", "echo hi", "exit.",
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(fmt=st.sampled_from(FORMATS), parts=st.lists(FRAGMENTS, max_size=8))
def test_any_cut_at_a_complete_action_parses_as_the_whole_reply(fmt, parts):
    assert_cuts_keep_the_action(fmt, "".join(parts))
