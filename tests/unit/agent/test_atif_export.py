"""Transcripts to ATIF: worked examples as copied context; a trajectory that cannot be written is a recorded error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mindforge.agent.atif_export import transcript_to_atif
from mindforge.agent.base import AgentOutcome
from mindforge.agent.loop import ModelAgent
from mindforge.agent.prompts import (
    render_examples,
    render_instruction,
    render_system_prompt,
)
from mindforge.agent.transcript import TranscriptWriter, read_transcript
from mindforge.atif import read_trajectory
from mindforge.hcp import derive, load_contract
from mindforge.tasks.loader import load_task
from mindforge.trainer.samples import _is_llm_call, _messages_and_calls
from mindforge.trials.record import FailureClass
from tests.fixtures.examples import COUNT_LINES, SORT_UNIQUE

REPO = Path(__file__).resolve().parents[3]
BASELINE = load_contract(REPO / "hcp_contracts" / "baseline.toml")
TASK = load_task(REPO / "tasks" / "jsonl-to-csv")


def with_examples(fmt: str):
    allow = ["bash", "finish"] if fmt in ("command", "fenced_bash") else list(BASELINE.tools.allow)
    examples = [COUNT_LINES, SORT_UNIQUE]
    changes = {"tools.action_format": fmt, "tools.allow": allow, "resources.examples": examples}
    return derive(BASELINE, name="ex", revision=f"1-{fmt}", edit="examples", changes=changes)


def events_for(contract) -> list[dict]:
    messages = [
        {"role": "system", "content": render_system_prompt(contract, [])},
        *render_examples(contract),
        {"role": "user", "content": render_instruction(contract, TASK.instruction)},
    ]
    ts = "2026-01-01T00:00:00+00:00"
    return [
        {"event": "request", "ts": ts, "turn": 1, "messages": messages},
        {
            "event": "reply",
            "ts": ts,
            "turn": 1,
            "content": "done",
            "finish_reason": "stop",
            "usage": {"prompt_tokens": 10, "completion_tokens": 1},
            "prompt_token_ids": list(range(10)),
            "completion_token_ids": [7],
            "logprobs": [-0.1],
        },
        {"event": "action", "ts": ts, "turn": 1, "tool": "finish", "arguments": {}, "call_id": "call_9"},
        {"event": "end", "ts": ts, "failure_class": None, "turns": 1, "prompt_tokens": 10, "completion_tokens": 1},
    ]


@pytest.mark.parametrize("fmt", ["json", "tool_calls", "fenced_bash", "command"])
def test_examples_are_copied_context_and_the_first_prompt_is_rebuilt_exactly(fmt):
    contract = with_examples(fmt)
    events = events_for(contract)
    traj = transcript_to_atif(events, contract=contract, task_id=TASK.id)
    copied = [s for s in traj.steps if s.is_copied_context]
    assert copied and all(s.source == "agent" and s.extra["mindforge"]["example"] for s in copied)
    assert len(copied) == 2 + 2 + 2  # two examples: two steps and a finish each
    calls = [s for s in traj.steps if _is_llm_call(s)]
    assert len(calls) == 1 and traj.extra["mindforge"]["agent_steps"] == 1
    rebuilt, _ = _messages_and_calls(traj.steps[: traj.steps.index(calls[0])])
    sent = events[0]["messages"]
    if fmt != "tool_calls":
        assert rebuilt == sent  # what the trainer renders is what the model saw
    else:  # native calls: the same turns and call ids; ATIF keeps arguments as objects
        assert [m["role"] for m in rebuilt] == [m["role"] for m in sent]
        assert [m.get("tool_call_id") for m in rebuilt] == [m.get("tool_call_id") for m in sent]
        args = [json.loads(c["function"]["arguments"]) for m in sent for c in m.get("tool_calls", [])]
        assert [c["function"]["arguments"] for m in rebuilt for c in m.get("tool_calls", [])] == args


def _agent_and_writer(tmp_path: Path):
    agent = ModelAgent(BASELINE, base_url="http://127.0.0.1:9/v1", api_key="unused")
    tr = TranscriptWriter(tmp_path / "transcript.jsonl")
    for event in events_for(BASELINE):
        tr.write(event["event"], **{k: v for k, v in event.items() if k not in ("event", "ts")})
    return agent, tr


def test_the_trajectory_is_written_atomically(tmp_path):
    agent, tr = _agent_and_writer(tmp_path)
    out = AgentOutcome()
    agent._write_trajectory(tr, tmp_path, out, TASK)
    tr.close()
    assert read_trajectory(Path(out.artifacts["trajectory"])).session_id.startswith(TASK.id)
    assert out.failure_class is None and sorted(p.name for p in tmp_path.iterdir()) == [
        "trajectory.json",
        "transcript.jsonl",
    ]  # no temporary file left behind


@pytest.mark.parametrize("earlier", [None, FailureClass.MAX_TURNS])
def test_a_trajectory_that_cannot_be_written_is_a_recorded_error(tmp_path, earlier):
    agent, tr = _agent_and_writer(tmp_path)
    (tmp_path / "trajectory.json").mkdir()  # the rename onto it fails
    out = AgentOutcome(failure_class=earlier, failure_detail="max_turns (30) reached" if earlier else "")
    agent._write_trajectory(tr, tmp_path, out, TASK)
    tr.close()
    assert "trajectory" not in out.artifacts
    assert "Error" in Path(out.artifacts["trajectory_error"]).read_text()  # the traceback
    errors = [e for e in read_transcript(tr.path) if e["event"] == "trajectory_error"]
    assert len(errors) == 1 and errors[0]["detail"].startswith("trajectory not written: IsADirectoryError")
    if earlier is None:
        assert (out.failure_class, out.failure_detail) == (FailureClass.AGENT_ERROR, errors[0]["detail"])
    else:  # the phase's own failure stays; the lost trajectory is added to its detail
        assert out.failure_class == earlier and out.failure_detail.endswith(errors[0]["detail"])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".trajectory")]


def test_a_reply_keeps_its_cached_tokens_round_trip_and_engine_timings(tmp_path):
    """The agent's reply event, from a response parsed by the OpenAI SDK, reaches the ATIF step."""
    from openai.types.chat import ChatCompletion

    from mindforge.policy.server.protocol import completion_body

    timings = {"cache_n": 8, "prompt_n": 2, "prompt_ms": 4.0, "predicted_n": 1, "predicted_ms": 1.5, "queue_ms": 0.0}
    resp = ChatCompletion.model_validate(completion_body(
        model="m", content='{"tool": "finish", "arguments": {}}', tool_calls=[], finish_reason="stop",
        prompt_token_ids=list(range(10)), completion_token_ids=[7], logprobs=None, return_token_ids=True,
        cached_tokens=8, timings=timings,
    ))
    agent = ModelAgent(BASELINE, base_url="http://127.0.0.1:1/v1")
    tr = TranscriptWriter(tmp_path / "t.jsonl")
    agent._account(resp, AgentOutcome(), tr, 1, resp.choices[0], 0.25)
    tr.close()
    (reply,) = read_transcript(tmp_path / "t.jsonl")
    assert reply["usage"] == {"prompt_tokens": 10, "completion_tokens": 1, "cached_tokens": 8}
    assert reply["timings"] == timings and reply["request_sec"] == 0.25
    events = events_for(BASELINE)
    events[1] |= {k: reply[k] for k in ("usage", "timings", "request_sec")}
    step = transcript_to_atif(events, contract=BASELINE, task_id="t", session_id="s").steps[-1]
    assert step.metrics.cached_tokens == 8
    extra = step.metrics.extra["mindforge"]
    assert extra["timings"] == timings and extra["request_sec"] == 0.25
