"""Pure helpers of the policy wire protocol: tool-call parsing, request checks, adapter identity."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from mindforge.policy.server.protocol import (
    AdapterRegistry,
    ChatCompletionRequest,
    adapter_sha256,
    completion_body,
    message_text,
    parse_tool_calls,
    tool_names,
)


def test_parse_tool_calls_extracts_hermes_blocks() -> None:
    text = 'Let me look.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>'
    content, calls = parse_tool_calls(text)
    assert content == "Let me look."
    assert len(calls) == 1 and calls[0]["type"] == "function" and calls[0]["id"].startswith("call_")
    assert calls[0]["function"]["name"] == "bash"
    assert json.loads(calls[0]["function"]["arguments"]) == {"command": "ls -la"}


def test_parse_tool_calls_several_and_only_calls() -> None:
    text = (
        '<tool_call>{"name": "a", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "b", "arguments": "{\\"x\\": 1}"}</tool_call>'
    )
    content, calls = parse_tool_calls(text)
    assert content is None
    assert [c["function"]["name"] for c in calls] == ["a", "b"]
    assert calls[1]["function"]["arguments"] == '{"x": 1}'
    assert calls[0]["id"] != calls[1]["id"]


@pytest.mark.parametrize("body", ["not json", '["a list"]', '{"arguments": {}}', '{"name": 3}'])
def test_malformed_tool_call_stays_text(body: str) -> None:
    text = f"before <tool_call>{body}</tool_call> after"
    assert parse_tool_calls(text) == (text, [])


def test_request_checks() -> None:
    ok = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], stop="END", max_tokens=5)
    assert ok.stop_list == ["END"] and ok.token_limit == 5
    both = ChatCompletionRequest(
        model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=5, max_completion_tokens=9
    )
    assert both.token_limit == 9
    for bad in ({"n": 2}, {"stream": True}, {"temperature": -1}, {"top_logprobs": 21}, {"messages": []}):
        with pytest.raises(ValidationError):
            ChatCompletionRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": "x"}], **bad})


def test_message_text_and_tool_names() -> None:
    assert message_text(None) == ""
    assert message_text([{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]) == "ab"
    tools = [{"type": "function", "function": {"name": "bash"}}, {"type": "function", "function": {"name": "finish"}}]
    assert tool_names(tools) == ["bash", "finish"]
    assert tool_names(None) == []


def test_completion_body_token_ids_only_when_asked() -> None:
    kw = dict(
        model="m",
        content="hi",
        tool_calls=[],
        finish_reason="stop",
        prompt_token_ids=[1, 2, 3],
        completion_token_ids=[4, 5],
        logprobs=None,
    )
    plain = completion_body(**kw, return_token_ids=False)
    assert "prompt_token_ids" not in plain and "token_ids" not in plain["choices"][0]
    assert plain["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    vllm = completion_body(**kw, return_token_ids=True)
    assert vllm["prompt_token_ids"] == [1, 2, 3] and vllm["choices"][0]["token_ids"] == [4, 5]


def test_completion_body_reports_the_prefix_cache_and_timings_only_when_given() -> None:
    kw = dict(model="m", content="hi", tool_calls=[], finish_reason="stop", prompt_token_ids=[1, 2, 3],
              completion_token_ids=[4, 5], logprobs=None, return_token_ids=False)
    assert "timings" not in completion_body(**kw) and "prompt_tokens_details" not in completion_body(**kw)["usage"]
    timings = {"cache_n": 2, "prompt_n": 1, "prompt_ms": 3.5, "predicted_n": 2, "predicted_ms": 7.0}
    body = completion_body(**kw, cached_tokens=2, timings=timings)
    assert body["usage"]["prompt_tokens_details"] == {"cached_tokens": 2}
    assert body["timings"] == timings


def test_adapter_identity_and_name_binding(tmp_path) -> None:
    a = tmp_path / "a"
    a.mkdir()
    (a / "adapter_config.json").write_text("{}")
    (a / "adapter_model.safetensors").write_bytes(b"weights-1")
    sha1 = adapter_sha256(a)
    assert adapter_sha256(a) == sha1
    (a / "adapter_model.safetensors").write_bytes(b"weights-2")
    sha2 = adapter_sha256(a)
    assert sha2 != sha1
    with pytest.raises(FileNotFoundError):
        adapter_sha256(tmp_path / "empty-dir-missing")

    reg = AdapterRegistry()
    assert reg.check_load("rev1", sha1) == "new"
    reg.add("rev1", str(a), sha1)
    assert reg.check_load("rev1", sha1) == "same"
    with pytest.raises(ValueError, match="different weights"):
        reg.check_load("rev1", sha2)
    reg.remove("rev1")
    assert "rev1" not in reg.loaded
    with pytest.raises(ValueError):  # still bound after unload
        reg.check_load("rev1", sha2)
    assert reg.check_load("rev1", sha1) == "new"
