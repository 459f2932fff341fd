"""The scripted policy (a test double behind the real OpenAI-compatible HTTP API), via the ``openai`` SDK."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import openai
import pytest

from mindforge.errors import InputError
from mindforge.policy.doubles.scripted import PolicyScript, start_scripted_policy
from mindforge.policy.server.runner import PolicyServerProcess

ACTION = {"action": "bash", "command": "cat /app/hint.txt"}
SCRIPT = {
    "rules": [
        {"match": {"model": "slow"}, "reply": {"content": "late", "delay_sec": 0.5}},
        {"match": {"system_contains": "BREAK"}, "reply": {"http_status": 500}},
        {"match": {"system_contains": "HINT_X"}, "reply": {"content": json.dumps(ACTION)}},
        {"match": {"tool_available": "bash", "turn": 0},
         "reply": {"tool_call": {"name": "bash", "arguments": {"command": "ls"}}}},
        {"match": {"last_message_contains": "exit code 1"}, "reply": {"content": "", "finish_reason": "stop"}},
        {"match": {"last_message_contains": "long"}, "reply": {"content": "cut he", "finish_reason": "length"}},
        {"match": {"system_contains": "COIN"}, "success_probability": 0.5,
         "reply": {"content": "heads"}, "on_failure": {"content": "tails"}},
        {"match": {"system_contains": "FLIP"}, "alternate": True,
         "reply": {"content": "pass"}, "on_failure": {"content": "fail"}},
        {"match": {"system_contains": "EVEN"}, "alternate": True, "reply": {"content": "first"}},
    ],
    "default": {"content": "no rule"},
    "seed": 11,
    "base_models": ["scripted", "slow"],
}


@pytest.fixture(scope="module")
def server():
    handle = start_scripted_policy(SCRIPT)
    yield handle
    handle.stop()


@pytest.fixture(scope="module")
def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=30)


def ask(client: openai.OpenAI, system: str = "plain", user: str = "go", model: str = "scripted", **kw):
    messages = kw.pop("messages", None) or [{"role": "system", "content": system}, {"role": "user", "content": user}]
    return client.chat.completions.create(model=model, messages=messages, **kw)


def test_system_prompt_rule_and_default(client) -> None:
    assert json.loads(ask(client, system="Use HINT_X now.").choices[0].message.content) == ACTION
    resp = ask(client)
    assert resp.choices[0].message.content == "no rule" and resp.choices[0].finish_reason == "stop"
    assert resp.usage.completion_tokens == len(b"no rule") and resp.usage.prompt_tokens > 0


def test_native_tool_call_when_tool_offered_on_first_turn(client) -> None:
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    resp = ask(client, tools=tools)
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert choice.message.tool_calls[0].function.name == "bash"
    assert json.loads(choice.message.tool_calls[0].function.arguments) == {"command": "ls"}
    # the tool named in the system prompt counts too; a later turn does not match turn 0
    assert ask(client, system="Tools: bash, finish").choices[0].message.tool_calls
    later = [
        {"role": "system", "content": "Tools: bash"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "ok"},
        {"role": "tool", "tool_call_id": "c", "content": "fine"},
    ]
    assert ask(client, messages=later).choices[0].message.content == "no rule"


def test_knobs_empty_length_error_delay(client) -> None:
    tool_turn = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "x"},
        {"role": "tool", "tool_call_id": "c", "content": "exit code 1"},
    ]
    assert ask(client, messages=tool_turn).choices[0].message.content == ""
    cut = ask(client, user="make it long").choices[0]
    assert (cut.message.content, cut.finish_reason) == ("cut he", "length")
    with pytest.raises(openai.InternalServerError):
        ask(client, system="BREAK")
    start = time.monotonic()
    assert ask(client, model="slow").choices[0].message.content == "late"
    assert time.monotonic() - start >= 0.5


def test_token_ids_and_logprobs_are_well_formed(client) -> None:
    resp = ask(client, logprobs=True, top_logprobs=2, extra_body={"return_token_ids": True})
    body = resp.model_dump()
    ids = body["choices"][0]["token_ids"]
    assert bytes(ids).decode() == "no rule"
    assert len(body["prompt_token_ids"]) == resp.usage.prompt_tokens
    entries = resp.choices[0].logprobs.content
    assert len(entries) == len(ids) and all(e.logprob == -0.1 and len(e.top_logprobs) == 1 for e in entries)
    assert "prompt_token_ids" not in ask(client).model_dump()


def test_seeded_success_probability(client) -> None:
    by_seed = {s: ask(client, system="COIN", seed=s).choices[0].message.content for s in range(40)}
    assert set(by_seed.values()) == {"heads", "tails"}
    assert 8 <= sum(v == "heads" for v in by_seed.values()) <= 32
    # a request seed makes the draw independent of arrival order
    assert {s: ask(client, system="COIN", seed=s).choices[0].message.content for s in reversed(range(40))} == by_seed


def test_alternate_rule_splits_every_run_of_requests(client) -> None:
    """An ``alternate`` rule succeeds on its 1st, 3rd, ... matching request: any two in a row disagree."""
    replies = [ask(client, system="FLIP", seed=1).choices[0].message.content for _ in range(5)]
    assert replies == ["pass", "fail", "pass", "fail", "pass"]  # the request seed does not matter
    # without ``on_failure`` a failed turn falls through to the next rules (here: the default)
    assert [ask(client, system="EVEN").choices[0].message.content for _ in range(3)] == ["first", "no rule", "first"]


def test_models_adapters_and_unknown_model(server, client) -> None:
    url = server.base_url
    assert [m.id for m in client.models.list().data] == ["scripted", "slow"]
    with pytest.raises(openai.NotFoundError):
        ask(client, model="rev1")
    loaded = httpx.post(f"{url}/load_lora_adapter", json={"lora_name": "rev1", "lora_path": "/x/rev1"})
    assert loaded.text.startswith("Success")
    assert ask(client, model="rev1").choices[0].message.content == "no rule"
    assert (
        httpx.post(f"{url}/load_lora_adapter", json={"lora_name": "rev1", "lora_path": "/x/other"}).status_code == 400
    )
    assert httpx.post(f"{url}/unload_lora_adapter", json={"lora_name": "rev1"}).status_code == 200
    assert httpx.post(f"{url}/unload_lora_adapter", json={"lora_name": "rev1"}).status_code == 404
    assert httpx.post(f"{url}/load_lora_adapter", json={"lora_name": ""}).status_code == 400
    logged = httpx.get(f"{url}/scripted/requests").json()
    assert logged and logged[-1]["model"] == "rev1"
    assert server.app.state.policy.requests[-1]["model"] == "rev1"


def test_script_file_errors_name_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rules": [{"reply": {"content": "x"}, "success_probability": 2}]}))
    with pytest.raises(InputError) as err:
        PolicyScript.from_file(bad)
    assert err.value.field == "rules.0.success_probability" and str(bad) in str(err.value)
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(InputError, match="not valid JSON"):
        PolicyScript.from_file(tmp_path / "broken.json")


def test_runs_as_a_subprocess(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps({"rules": [{"match": {"system_contains": "HINT_X"}, "reply": {"content": "from child"}}]})
    )
    args = ["--script", str(script)]
    with PolicyServerProcess("mindforge.policy.doubles.scripted", args, ready_timeout_sec=60) as proc:
        client = openai.OpenAI(base_url=proc.base_url, api_key="unused", max_retries=0)
        assert ask(client, system="HINT_X").choices[0].message.content == "from child"
    assert proc.proc.poll() is not None
