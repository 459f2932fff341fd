"""Failure audit: rules on recorded transcripts (a table of cases), usability, and the optional judge.

The judge tests use the scripted policy behind the real OpenAI-compatible HTTP API (the
only test double MindForge allows) so that "the judge" replies in a known way.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mindforge.audit import (
    AuditResult,
    NotAFailureError,
    audit_trial,
    usable_for_scoring,
    usable_for_training,
)
from mindforge.audit_judge import judge_audit, parse_judge_reply
from mindforge.hcp import derive, load_contract
from mindforge.policy.doubles.scripted import start_scripted_policy
from mindforge.policy.server.runner import free_port
from mindforge.store.models import AuditOwner
from mindforge.trials.record import FailureClass, LimitFired, TrialRecord

REPO = Path(__file__).resolve().parents[2]
BASELINE = load_contract(REPO / "hcp_contracts" / "baseline.toml")
HIDDEN = derive(
    BASELINE, revision="1.0.0-hidden", edit="hooks: errors hidden", changes={"hooks.on_command_error": "none"}
)


def record(cls: FailureClass | None, reward: float | None = 0.0, limit: LimitFired | None = None, **kw) -> TrialRecord:
    return TrialRecord(
        trial_id="t1",
        run_id="r",
        task_id="demo",
        task_hash="h" * 64,
        agent="model",
        reward=reward,
        failure_class=cls,
        failure_detail=kw.pop("detail", "detail"),
        limit_fired=limit,
        num_turns=kw.pop("num_turns", 5),
        **kw,
    )


def act(turn: int, command: str, code: int = 0, out: str = "ok") -> list[dict]:
    """reply, action, observation: three transcript lines of one bash turn."""
    return [
        {"event": "reply", "turn": turn, "finish_reason": "stop"},
        {"event": "action", "turn": turn, "tool": "bash", "arguments": {"command": command}},
        {
            "event": "observation",
            "turn": turn,
            "content": f"exit code {code}\nstdout:\n{out}\n[turn {turn}/30; 50 s left]",
        },
    ]


def finish(turn: int) -> list[dict]:
    return [
        {"event": "reply", "turn": turn, "finish_reason": "stop"},
        {"event": "action", "turn": turn, "tool": "finish", "arguments": {}},
    ]


def end(cls: str | None = None, limit: str | None = None) -> list[dict]:
    return [{"event": "end", "failure_class": cls, "limit_fired": limit, "detail": ""}]


REQUEST = [{"event": "request", "turn": 1, "messages": []}]
NOT_AVAILABLE = {
    "event": "unusable_reply",
    "failure_class": "parse_error",
    "reason": "tool 'read_file' is not available; available tools: bash, finish",
    "count": 1,
}
CUT = "exit code 0\nstdout:\nhead\n[... 50000 bytes omitted ...]\ntail\n[turn 3/30; 40 s left]"
HIDDEN_OBS = "exit code 2\n[turn 3/30; 40 s left]"

CASES = [
    # (id, record kwargs, events, task_verdict, contract, owner, rule); a long row goes on over the next lines
    ("env-build", dict(cls=FailureClass.ENV_BUILD_FAILED, reward=None),
     None, None, None, "infra", "infra.env_build_failed"),
    ("env-start", dict(cls=FailureClass.ENV_START_FAILED, reward=None),
     None, None, None, "infra", "infra.env_start_failed"),
    ("infra", dict(cls=FailureClass.INFRA_ERROR, reward=None), None, None, None, "infra", "infra.infra_error"),
    ("endpoint", dict(cls=FailureClass.ENDPOINT_ERROR),
     REQUEST + end("endpoint_error"), None, None, "infra", "infra.endpoint_error"),
    ("verifier-timeout", dict(cls=FailureClass.VERIFIER_TIMEOUT, reward=None),
     None, None, None, "task", "task.verifier_timeout"),
    ("verifier-error", dict(cls=FailureClass.VERIFIER_ERROR, reward=None),
     None, None, None, "task", "task.verifier_error"),
    ("known-broken", dict(cls=FailureClass.TASK_FAILED),
     act(1, "ls") + finish(2), "broken", None, "task", "task.known_broken"),
    ("known-flaky", dict(cls=FailureClass.MAX_TURNS), act(1, "ls"), "flaky", None, "task", "task.known_flaky"),
    ("trivial", dict(cls=FailureClass.TASK_FAILED), finish(1), "trivial", None, "task", "task.known_trivial"),
    ("tool-missing", dict(cls=FailureClass.TASK_FAILED),
     act(1, "ls") + [NOT_AVAILABLE] + finish(2), None, None, "config", "config.tool_missing"),
    ("parse-error", dict(cls=FailureClass.PARSE_ERROR),
     [dict(NOT_AVAILABLE, reason="no JSON action found")] * 3 + end("parse_error"),
     None, None, "config", "config.parse_failure"),
    ("empty-reply", dict(cls=FailureClass.EMPTY_REPLY),
     end("empty_reply"), None, None, "config", "config.parse_failure"),
    ("truncated", dict(cls=FailureClass.TRUNCATED_REPLY),
     end("truncated_reply"), None, None, "config", "config.parse_failure"),
    ("context", dict(cls=FailureClass.CONTEXT_OVERFLOW, limit=LimitFired.CONTEXT_WINDOW),
     act(1, "cat big") + end("context_overflow"), None, None, "config", "config.context_overflow"),
    ("turns-progressing", dict(cls=FailureClass.MAX_TURNS, limit=LimitFired.MAX_TURNS),
     [e for i in range(1, 9) for e in act(i, f"step {i}", out=f"out {i}")] + end("max_turns", "max_turns"),
     None, None, "config", "config.limit_while_progressing"),
    ("turns-looping", dict(cls=FailureClass.MAX_TURNS, limit=LimitFired.MAX_TURNS),
     [e for i in range(1, 9) for e in act(i, "make", code=2, out="error")] + end("max_turns", "max_turns"),
     None, None, "model", "model.stuck"),
    ("timeout-progressing", dict(cls=FailureClass.AGENT_TIMEOUT, limit=LimitFired.AGENT_TIMEOUT),
     [e for i in range(1, 5) for e in act(i, f"build {i}", out=f"built {i}")] + end("agent_timeout"),
     None, None, "config", "config.limit_while_progressing"),
    ("tokens-unusable", dict(cls=FailureClass.TOKEN_BUDGET, limit=LimitFired.TOKEN_BUDGET),
     act(1, "ls") + [{"event": "reply", "turn": 2}, dict(NOT_AVAILABLE, reason="no JSON action found")] * 3
     + end("token_budget"),
     None, None, "config", "config.parse_failure"),
    ("output-cut", dict(cls=FailureClass.TASK_FAILED),
     act(1, "ls") + act(2, "./build.sh", out="x") + [{"event": "observation", "turn": 3, "content": CUT}] + finish(4),
     None, BASELINE, "config", "config.output_cut"),
    ("errors-hidden", dict(cls=FailureClass.TASK_FAILED),
     act(1, "ls")
     + [{"event": "action", "turn": 2, "tool": "bash", "arguments": {"command": "make"}},
        {"event": "observation", "turn": 2, "content": HIDDEN_OBS}]
     + finish(3),
     None, HIDDEN, "config", "config.error_output_hidden"),
    ("wrong-answer", dict(cls=FailureClass.TASK_FAILED),
     act(1, "ls") + act(2, "echo 41 > out") + finish(3) + end(), None, BASELINE, "model", "model.wrong_answer"),
    ("finished-on-errors", dict(cls=FailureClass.TASK_FAILED),
     act(1, "make", code=2) + act(2, "make test", code=2) + finish(3),
     None, BASELINE, "model", "model.finished_on_errors"),
    ("no-transcript", dict(cls=FailureClass.TASK_FAILED), None, None, None, "model", "model.no_transcript"),
    ("partial-reward", dict(cls=None, reward=0.5), act(1, "ls") + finish(2), None, None, "model", "model.wrong_answer"),
    ("pids-test-failed", dict(cls=FailureClass.TASK_FAILED, limit=LimitFired.PIDS_LIMIT),
     act(1, "./serve &") + finish(2), None, BASELINE, "model", "model.pids_exhausted"),
    # the verifier could not start its commands: the agent's processes, not the task's verifier
    ("pids-verifier-error", dict(cls=FailureClass.VERIFIER_ERROR, reward=None, limit=LimitFired.PIDS_LIMIT),
     None, None, None, "model", "model.pids_exhausted"),
    ("pids-infra", dict(cls=FailureClass.INFRA_ERROR, reward=None, limit=LimitFired.PIDS_LIMIT),
     None, None, None, "infra", "infra.infra_error"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "events", "verdict", "contract", "owner", "rule"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_audit_rules_classify_recorded_transcripts(kwargs, events, verdict, contract, owner, rule) -> None:
    trial = record(**kwargs)
    result = audit_trial(trial, events, task_verdict=verdict, contract=contract)
    assert (result.owner.value, result.rule) == (owner, rule)
    assert result.judged_by == "rules"
    assert result.failure_class == (trial.failure_class or FailureClass.TASK_FAILED)
    assert set(result.evidence) >= {"lines", "limits_fired", "detail"}
    for start, stop in result.evidence["lines"]:
        assert 1 <= start <= stop <= len(events or [])


def plain(turn: int, command: str, code: int = 0, out: str = "ok", *, shown=True, hidden=False) -> list[dict]:
    """A bash turn as the shell formats show it: terminal text, exit code as a recorded fact."""
    text = (out if not hidden else "") + (f"\n[exit code {code}]" if shown else "")
    return [
        {"event": "reply", "turn": turn, "finish_reason": "stop"},
        {"event": "action", "turn": turn, "tool": "bash", "arguments": {"command": command}},
        {
            "event": "observation",
            "turn": turn,
            "content": text.strip() or "(no output)",
            "exit_code": code,
            "output_hidden": hidden,
        },
    ]


@pytest.mark.parametrize("shown", [True, False])
def test_rules_read_the_recorded_exit_code_whatever_the_observation_shows(shown: bool) -> None:
    failing = plain(1, "make", code=2, out="error", shown=shown) + plain(2, "make test", code=2, shown=shown)
    verdict = audit_trial(record(FailureClass.TASK_FAILED), failing + finish(3), contract=BASELINE)
    assert verdict.rule == "model.finished_on_errors"
    looping = [e for i in range(1, 9) for e in plain(i, f"step {i}", out=f"out {i}", shown=shown)]
    limit = record(FailureClass.MAX_TURNS, limit=LimitFired.MAX_TURNS)
    assert audit_trial(limit, looping + end("max_turns", "max_turns")).rule == "config.limit_while_progressing"
    hidden = plain(1, "ls") + plain(2, "make", code=2, out="error", shown=shown, hidden=True) + finish(3)
    assert audit_trial(record(FailureClass.TASK_FAILED), hidden, contract=HIDDEN).rule == "config.error_output_hidden"
    nothing_hidden = plain(1, "ls") + plain(2, "false", code=1, out="", shown=shown) + finish(3)
    assert audit_trial(record(FailureClass.TASK_FAILED), nothing_hidden, contract=HIDDEN).rule == "model.wrong_answer"


def test_evidence_names_the_lines_the_tool_and_the_limit() -> None:
    events = act(1, "ls") + [NOT_AVAILABLE] + finish(2)  # the unusable reply is line 4
    result = audit_trial(record(FailureClass.TASK_FAILED), events)
    assert result.evidence["lines"] == [[4, 4]]
    assert result.evidence["tools"] == ["read_file"]

    events = [e for i in range(1, 9) for e in act(i, f"step {i}", out=f"out {i}")] + end("max_turns", "max_turns")
    result = audit_trial(record(FailureClass.MAX_TURNS, limit=LimitFired.MAX_TURNS), events)
    assert result.evidence["limits_fired"] == ["max_turns"]
    # the last six actions (turns 3..8) with their observations, and the end event (line 25)
    assert result.evidence["lines"] == [[8, 9], [11, 12], [14, 15], [17, 18], [20, 21], [23, 25]]

    cut = act(1, "ls") + [{"event": "observation", "turn": 2, "content": CUT}] + finish(3)
    result = audit_trial(record(FailureClass.TASK_FAILED), cut, contract=BASELINE)
    assert result.evidence["lines"] == [[4, 4]]
    assert result.evidence["omitted_bytes"] == 50000
    assert result.evidence["max_observation_bytes"] == BASELINE.tools.max_observation_bytes


def test_pids_limit_is_in_the_evidence() -> None:
    detail = "verifier reward 0; the sandbox's pids limit fired, 58 of 64 processes, 2 forks refused"
    result = audit_trial(record(FailureClass.TASK_FAILED, limit=LimitFired.PIDS_LIMIT, detail=detail), None)
    assert result.evidence["limits_fired"] == ["pids_limit"] and "58 of 64 processes" in result.evidence["detail"]
    assert not result.needs_judge


def test_only_ambiguous_verdicts_ask_for_a_judge() -> None:
    clean = audit_trial(record(FailureClass.TASK_FAILED), act(1, "ls") + finish(2))
    on_errors = audit_trial(record(FailureClass.TASK_FAILED), act(1, "make", 2) + act(2, "make", 1) + finish(3))
    missing = audit_trial(record(FailureClass.TASK_FAILED), None)
    infra = audit_trial(record(FailureClass.INFRA_ERROR, reward=None), None)
    assert (clean.needs_judge, on_errors.needs_judge, missing.needs_judge, infra.needs_judge) == (
        False,
        True,
        True,
        False,
    )


def test_a_passed_trial_is_not_audited() -> None:
    with pytest.raises(NotAFailureError):
        audit_trial(record(None, reward=1.0), [])


@pytest.mark.parametrize(
    ("kwargs", "owner", "search", "training"),
    [
        (dict(cls=None, reward=1.0), None, True, True),
        (dict(cls=FailureClass.TASK_FAILED, reward=0.0), AuditOwner.MODEL, True, True),
        (dict(cls=FailureClass.MAX_TURNS, reward=0.0), AuditOwner.CONFIG, True, True),
        (dict(cls=FailureClass.INFRA_ERROR, reward=None), AuditOwner.INFRA, False, False),
        (dict(cls=FailureClass.VERIFIER_ERROR, reward=None), AuditOwner.TASK, False, False),
        (dict(cls=FailureClass.ENDPOINT_ERROR, reward=None), AuditOwner.INFRA, False, False),
        (dict(cls=FailureClass.TASK_FAILED, reward=0.0), AuditOwner.TASK, False, False),  # known broken task
        (dict(cls=FailureClass.TASK_FAILED, reward=0.0, num_turns=0), None, True, False),  # no model turns
    ],
)
def test_only_real_rewards_are_usable(kwargs, owner, search, training) -> None:
    trial = record(**kwargs)
    audit = None
    if owner is not None:
        audit = AuditResult(trial_id="t1", failure_class=trial.failure_class, owner=owner, rule="x")
    assert usable_for_scoring(trial, audit) is search
    assert usable_for_training(trial, audit) is training


@pytest.mark.parametrize(
    ("reply", "ok"),
    [
        ('{"owner": "task", "reason": "the test file is missing"}', True),
        ('```json\n{"owner": "config", "reason": "cut"}\n```', True),
        ('{"owner": "nobody", "reason": "x"}', False),
        ('{"owner": "model"}', False),
        ('{"owner": "model", "reason": "x", "extra": 1}', False),
        ("the model is at fault", False),
        ('["model"]', False),
    ],
)
def test_judge_replies_are_parsed_strictly(reply: str, ok: bool) -> None:
    if ok:
        owner, reason = parse_judge_reply(reply)
        assert owner in set(AuditOwner) and reason
    else:
        with pytest.raises(ValueError):
            parse_judge_reply(reply)


def test_judge_decides_what_rules_cannot_and_is_recorded() -> None:
    trial = record(FailureClass.TASK_FAILED)
    events = act(1, "make", code=2, out="No rule to make target") + act(2, "make test", code=2) + finish(3)
    rules = audit_trial(trial, events)
    assert rules.needs_judge and rules.owner is AuditOwner.MODEL
    script = {
        "rules": [
            {
                "match": {"system_contains": "You audit failed attempts"},
                "reply": {"content": '{"owner": "task", "reason": "the Makefile the task needs is missing"}'},
            }
        ]
    }
    with start_scripted_policy(script) as server:
        judged = judge_audit(trial, events, rules, base_url=server.base_url, model="scripted")
        asked = server.app.state.policy.requests
    assert judged.owner is AuditOwner.TASK
    assert judged.judged_by == "judge:scripted"
    assert judged.evidence["rules_owner"] == "model" and judged.evidence["rules_rule"] == "model.finished_on_errors"
    assert "Makefile" in judged.evidence["judge_reason"]
    assert "L2 action: bash" in asked[0]["messages"][1]["content"]  # the judge saw the line-numbered digest


def test_a_bad_judge_reply_or_a_dead_endpoint_keeps_the_rules_verdict() -> None:
    trial = record(FailureClass.TASK_FAILED)
    rules = audit_trial(trial, None)
    with start_scripted_policy({"default": {"content": "I think the model did it."}}) as server:
        judged = judge_audit(trial, None, rules, base_url=server.base_url, model="scripted")
    assert judged.judged_by == "rules" and judged.owner is rules.owner
    assert "JudgeReplyError" in judged.evidence["judge_rejected"]
    dead = judge_audit(trial, None, rules, base_url=f"http://127.0.0.1:{free_port()}/v1", model="x", timeout_sec=2)
    assert dead.judged_by == "rules" and "judge_rejected" in dead.evidence
