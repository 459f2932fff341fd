"""Fuzzing model replies in every action format: parsing yields an action or a parse failure, never a crash."""

from __future__ import annotations

import json

from hypothesis import example, given
from hypothesis import strategies as st

from mindforge.agent.actions import Action, ActionParseError, parse_reply
from mindforge.replies import ReplyFormatError, load_json_object
from mindforge.trials.verify import RewardError, parse_reward_json, parse_reward_txt
from tests.unit.fuzz.strategies import FUZZ, HUGE, garbage_bytes, garbage_text

FORMATS = ("json", "tool_calls", "fenced_bash", "command")
ALLOWED = {"json": ["bash", "read_file", "write_file", "finish"], "tool_calls": ["bash", "read_file", "write_file",
           "finish"], "fenced_bash": ["bash", "finish"], "command": ["bash", "finish"]}  # fmt: skip
DEEP = "[" * 100_000

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=10,
)


@st.composite
def near_valid_actions(draw: st.DrawFn) -> str:
    """A valid json action with one part mutated, wrapped as a model might wrap it."""
    action: dict = {"tool": "bash", "arguments": {"command": "ls -la"}}
    part = draw(st.sampled_from(["tool", "arguments", "command", "extra", "none"]))
    if part == "tool":
        action["tool"] = draw(json_values)
    elif part == "arguments":
        action["arguments"] = draw(json_values)
    elif part == "command":
        action["arguments"]["command"] = draw(json_values)
    elif part == "extra":
        action[draw(st.text(max_size=8))] = draw(json_values)
    text = json.dumps(action)
    cut = draw(st.integers(min_value=0, max_value=len(text)))
    text = draw(st.sampled_from([text, text[:cut], f"```json\n{text}\n```", f"Sure!\n{text}\nDone."]))
    return text


@st.composite
def tool_calls(draw: st.DrawFn) -> list:
    """Native tool calls as the SDK or a broken server might hand them over (dicts of any shape)."""
    call = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "id": json_values,
                "type": st.just("function"),
                "function": st.fixed_dictionaries(
                    {}, optional={"name": json_values | st.sampled_from(["bash", "finish"]), "arguments": json_values}
                )
                | json_values,
            },
        )
    )
    return draw(st.lists(st.just(call) | json_values, max_size=2))


def _parses_or_fails(action_format: str, content: str, calls: list) -> None:
    try:
        action = parse_reply(action_format, content, calls, ALLOWED[action_format], "call_1")
    except ActionParseError as exc:
        assert str(exc) and len(str(exc)) < 1_000, "a parse failure says why, without echoing the reply whole"
        return
    assert isinstance(action, Action) and action.tool in ALLOWED[action_format]


@FUZZ
@given(st.sampled_from(FORMATS), garbage_text | near_valid_actions(), tool_calls())
@example("json", '{"tool": ' + DEEP, [])
@example("json", '{"tool": "bash", "arguments": {"command": ' + DEEP + "}}", [])
@example("json", "{" * 20_000, [])
@example("fenced_bash", "```bash\n" + HUGE + "\n```", [])
@example("command", "$ " + HUGE, [])
@example("tool_calls", "", [{"id": 7, "function": {"name": "bash", "arguments": '{"command": "ls"}'}}])
@example("tool_calls", "", [{"function": {"name": "bash", "arguments": "[" * 100_000}}])
@example("tool_calls", "", [{"id": "c"}])
@example("json", json.dumps({"tool": HUGE}), [])
@example("tool_calls", "", [{"function": {"name": HUGE, "arguments": "{"}}])
@example("tool_calls", "", ["not a call"])
def test_a_reply_is_an_action_or_a_parse_failure(action_format: str, content: str, calls: list) -> None:
    _parses_or_fails(action_format, content, calls)


@FUZZ
@given(garbage_text | near_valid_actions())
@example("[" * 100_000)
@example("```json\n" + "{" * 10 + "\n```")
def test_a_structured_reply_is_an_object_or_a_format_error(text: str) -> None:
    try:
        obj = load_json_object(text)
    except ReplyFormatError as exc:
        assert str(exc)
    else:
        assert isinstance(obj, dict)


@FUZZ
@given(garbage_bytes | garbage_text.map(str.encode))
@example(b"\xff\xfe{")
@example(b"[" * 100_000)
@example(b'{"reward": 1e999}')
@example(b"1" * 100_000)
def test_a_reward_file_is_a_reward_or_a_reward_error(data: bytes) -> None:
    for parse in (parse_reward_txt, lambda d: parse_reward_json(d)[0]):
        try:
            reward = parse(data)
        except RewardError as exc:
            assert len(str(exc)) < 1_000, "the reason does not echo the whole file"
        else:
            assert 0.0 <= reward <= 1.0
