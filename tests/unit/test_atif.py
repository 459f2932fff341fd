"""ATIF models: round trip, the RFC's field names, and its validation rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mindforge.atif import (
    SCHEMA_VERSION,
    Agent,
    Metrics,
    Observation,
    ObservationResult,
    Step,
    ToolCall,
    Trajectory,
    final_metrics_from_steps,
    parse_trajectory,
    read_trajectory,
    write_trajectory,
)
from mindforge.errors import InputError


def _document() -> dict:
    """A multi-step trajectory in the RFC's shape (user, agent with two tool calls, agent)."""
    return {
        "schema_version": "ATIF-v1.8",
        "session_id": "sess-42",
        "agent": {"name": "mindforge", "version": "0.1.0", "model_name": "tiny", "extra": {}},
        "notes": "test document",
        "steps": [
            {"step_id": 1, "timestamp": "2026-01-02T03:04:05Z", "source": "user", "message": "Count the files."},
            {
                "step_id": 2,
                "source": "agent",
                "model_name": "tiny",
                "reasoning_effort": "low",
                "message": "Listing both folders.",
                "reasoning_content": "Two calls at once.",
                "tool_calls": [
                    {"tool_call_id": "c1", "function_name": "bash", "arguments": {"command": "ls /a"}},
                    {"tool_call_id": "c2", "function_name": "bash", "arguments": {}},
                ],
                "observation": {
                    "results": [{"source_call_id": "c1", "content": "x\ny"}, {"source_call_id": "c2", "content": ""}]
                },
                "metrics": {
                    "prompt_tokens": 10,
                    "completion_tokens": 3,
                    "cached_tokens": 4,
                    "cost_usd": 0.001,
                    "prompt_token_ids": list(range(10)),
                    "completion_token_ids": [11, 12, 13],
                    "logprobs": [-0.1, -0.2, -0.3],
                    "extra": {"reasoning_tokens": 1},
                },
            },
            {
                "step_id": 3,
                "source": "agent",
                "message": [{"type": "text", "text": "There are 2 files."}],
                "metrics": {"prompt_tokens": 20, "completion_tokens": 5, "cost_usd": 0.002},
                "extra": {"mindforge": {"turn": 2}},
            },
        ],
        "extra": {"mindforge": {"trial_id": "t-1", "reward": 1.0}},
    }


def test_round_trip_keeps_rfc_field_names(tmp_path: Path) -> None:
    traj = parse_trajectory(_document())
    path = write_trajectory(traj, tmp_path / "sub" / "trajectory.json")
    again = read_trajectory(path)
    assert again == traj
    raw = json.loads(path.read_text())
    assert raw["schema_version"] == "ATIF-v1.8"
    step = raw["steps"][1]
    assert set(step["metrics"]) >= {"prompt_token_ids", "completion_token_ids", "logprobs", "cached_tokens"}
    assert step["tool_calls"][0] == {"tool_call_id": "c1", "function_name": "bash", "arguments": {"command": "ls /a"}}
    assert step["observation"]["results"][0] == {"source_call_id": "c1", "content": "x\ny"}
    assert "timestamp" not in step  # absent optionals are left out, not written as null
    assert raw["extra"]["mindforge"]["trial_id"] == "t-1"


def test_built_in_code_validates_and_sums_final_metrics() -> None:
    steps = [
        Step(step_id=1, source="system", message="sys"),
        Step(step_id=2, source="agent", message="a", metrics=Metrics(prompt_tokens=5, completion_tokens=2)),
        Step(
            step_id=3,
            source="agent",
            message="b",
            tool_calls=[ToolCall(tool_call_id="x", function_name="finish", arguments={})],
            observation=Observation(results=[ObservationResult(source_call_id="x", content="ok")]),
            metrics=Metrics(prompt_tokens=9, completion_tokens=1, cost_usd=0.5),
        ),
    ]
    final = final_metrics_from_steps(steps)
    assert (final.total_prompt_tokens, final.total_completion_tokens, final.total_steps) == (14, 3, 3)
    assert final.total_cost_usd == 0.5 and final.total_cached_tokens is None
    traj = Trajectory(session_id="s", agent=Agent(name="n", version="1"), steps=steps, final_metrics=final)
    assert traj.schema_version == SCHEMA_VERSION
    assert [s.step_id for s in traj.agent_steps()] == [2, 3]


@pytest.mark.parametrize(
    ("mutate", "field", "reason"),
    [
        (lambda d: d["steps"][2].update(step_id=7), "", "step ids run 1, 2, 3"),
        (
            lambda d: d["steps"][1]["observation"]["results"][0].update(source_call_id="nope"),
            "steps[1]",
            "names no tool call",
        ),
        (lambda d: d["steps"][0].update(reasoning_content="x"), "steps[0]", "agent-only field"),
        (lambda d: d["steps"][0].update(surprise=1), "steps[0].surprise", "Extra inputs"),
        (lambda d: d["steps"][0].update(source="tool"), "steps[0].source", "Input should be"),
        (lambda d: d["steps"][0].update(timestamp="yesterday"), "steps[0].timestamp", "ISO 8601"),
        (lambda d: d.update(schema_version="ATIF-v2.0"), "schema_version", "unsupported ATIF version"),
        (lambda d: d["agent"].pop("version"), "agent.version", "Field required"),
        (
            lambda d: d["steps"][2].update(message=[{"type": "image", "text": "x"}]),
            "steps[2].message[0]",
            "has 'source'",
        ),
        (lambda d: d["steps"][1]["metrics"].update(prompt_tokens=-1), "steps[1].metrics.prompt_tokens", "greater than"),
    ],
)
def test_rfc_rules_reject_with_field_and_reason(tmp_path: Path, mutate, field: str, reason: str) -> None:
    doc = _document()
    mutate(doc)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError) as err:
        read_trajectory(path)
    assert err.value.path == str(path)
    assert err.value.field == field
    assert reason in err.value.reason


def test_unreadable_files_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        read_trajectory(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="not JSON"):
        read_trajectory(bad)


def test_older_versions_read() -> None:
    doc = _document()
    doc["schema_version"] = "ATIF-v1.4"
    assert parse_trajectory(doc).schema_version == "ATIF-v1.4"
