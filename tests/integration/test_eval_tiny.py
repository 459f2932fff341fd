"""``mindforge eval`` end to end against the embedded policy server on the locally built tiny model.

No test double here: the real server (transformers + PEFT on the CPU) serves a tiny
random-weight model that MindForge builds offline; it exercises the whole loop but solves
nothing, so the test checks the plumbing (records, transcripts with token ids), not rewards.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mindforge.cli.main import app
from tests.conftest import BUNDLED_TASKS, REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_eval_two_tasks_on_tiny_model(settings, tmp_path):
    from mindforge.policy.server.server import start_policy_server

    out = tmp_path / "results.json"
    with start_policy_server("tiny") as server:
        result = CliRunner().invoke(
            app,
            [
                "eval",
                "--tasks", str(BUNDLED_TASKS / "log-5xx-report"),
                "--tasks", str(BUNDLED_TASKS / "fix-invoice-totals"),
                "--contract", str(REPO / "hcp_contracts" / "tiny.toml"),
                "--attempts", "2",
                "--base-url", server.base_url,
                "--out", str(out),
            ],
        )
    assert result.exit_code == 0, result.output
    summary = json.loads(out.read_text())
    records = summary["records"]
    assert len(records) == 4
    for rec in records:
        assert rec["failure_class"] != "endpoint_error", rec["failure_detail"]
        assert rec["completion_tokens"] > 0
        events = [json.loads(line) for line in Path(rec["artifacts"]["transcript"]).read_text().splitlines()]
        replies = [e for e in events if e["event"] == "reply"]
        assert replies and all(e["completion_token_ids"] and e["prompt_token_ids"] for e in replies)
        assert all(len(e["logprobs"]) == len(e["completion_token_ids"]) for e in replies)


def test_eval_serves_the_model_itself_with_model_flag(settings, tmp_path):
    """``eval --model tiny`` serves the tiny model in-process for the run (no --base-url)."""
    out = tmp_path / "results.json"
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "--tasks", str(BUNDLED_TASKS / "log-5xx-report"),
            "--contract", str(REPO / "hcp_contracts" / "tiny.toml"),
            "--model", "tiny",
            "--out", str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    [rec] = json.loads(out.read_text())["records"]
    assert rec["failure_class"] != "endpoint_error", rec["failure_detail"]
    assert rec["completion_tokens"] > 0
