"""Failure audit: who owns a failed trial - the infrastructure, the task, the harness config or the model.

Every failed or errored trial gets a failure class, an owner and evidence (1-based line
ranges of the transcript events that support the verdict, the limits that fired). Rules
decide first (:func:`audit_trial`, ``judged_by = "rules"``); what rules cannot decide is
flagged ``needs_judge`` and may go to an optional judge call on the policy endpoint
(:func:`mindforge.audit_judge.judge_audit`, ``judged_by = "judge:<model>"``).

The owners:

- ``infra``: the sandbox engine, the endpoint or the harness code failed;
- ``task``: a verifier error or timeout, or a task known to be broken, flaky or trivially
  passing (``task_verdict`` from task validation);
- ``config``: the harness stood in the way - a tool the model reached for is not allowed,
  the output was cut before the line that mattered, a turn/time/token limit fired while
  the model was still making progress, replies the harness could not parse, the context
  overflowed, or error output was hidden from the model;
- ``model``: the harness gave what was needed and the model still got it wrong, or the
  agent left so many processes that the sandbox's pids limit fired (``pids_limit`` in
  ``limits_fired``; the verifier's own commands could not start).

Only trials whose reward is real feed search scores and training
(:func:`usable_for_scoring`, :func:`usable_for_training`); infra and verifier errors never do.

The transcript events are those of :mod:`mindforge.agent.transcript` (``request``,
``reply``, ``action``, ``observation``, ``unusable_reply``, ``harness``, ``end``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, Field

from mindforge.domain import AuditOwner
from mindforge.trials.record import (
    NO_REWARD_CLASSES,
    FailureClass,
    LimitFired,
    TrialRecord,
)

#: failure classes owned by the infrastructure (the endpoint and the harness code count)
INFRA_CLASSES = frozenset(
    {
        FailureClass.ENV_BUILD_FAILED,
        FailureClass.ENV_START_FAILED,
        FailureClass.INFRA_ERROR,
        FailureClass.ENDPOINT_ERROR,
        FailureClass.AGENT_ERROR,
    }
)
#: failure classes owned by the task's verifier
TASK_CLASSES = frozenset({FailureClass.VERIFIER_ERROR, FailureClass.VERIFIER_TIMEOUT})
#: replies the harness could not use
PARSE_CLASSES = frozenset({FailureClass.PARSE_ERROR, FailureClass.EMPTY_REPLY, FailureClass.TRUNCATED_REPLY})
#: limits that end the agent phase early
LIMIT_CLASSES = frozenset({FailureClass.MAX_TURNS, FailureClass.AGENT_TIMEOUT, FailureClass.TOKEN_BUDGET})
_LIMITS = frozenset({LimitFired.MAX_TURNS, LimitFired.AGENT_TIMEOUT, LimitFired.TOKEN_BUDGET})
#: task validation verdicts that make any failure the task's
TASK_VERDICTS = frozenset({"broken", "flaky", "trivial"})

_OMITTED_RE = re.compile(r"\[\.\.\. (\d+) bytes omitted \.\.\.\]")
_EXIT_RE = re.compile(r"^exit code (-?\d+)")
_NOT_AVAILABLE_RE = re.compile(r"tool '([^']+)' is not available|not available")
#: how many of the last actions are looked at to tell progress from looping
PROGRESS_WINDOW = 6
#: a cut observation among this many last observations is "output cut before the key line"
RECENT_OBSERVATIONS = 3


class NotAFailureError(ValueError):
    """The trial passed (reward 1): there is nothing to audit."""


class AuditResult(BaseModel):
    """The audit verdict on one failed trial.

    Attributes:
        trial_id: the audited trial.
        failure_class: the class settled on (the trial's own; rules refine the owner).
        owner: infra, task, config or model.
        rule: the rule that decided, e.g. ``config.tool_missing``.
        evidence: JSON evidence: ``lines`` (1-based inclusive ``[start, end]`` ranges of
            transcript events), ``limits_fired``, ``detail`` and rule-specific keys.
        judged_by: ``"rules"`` or ``"judge:<model>"``.
        needs_judge: the rules fell back to a default and a judge may decide better.
    """

    trial_id: str
    failure_class: FailureClass
    owner: AuditOwner
    rule: str
    evidence: dict[str, Any] = Field(default_factory=dict)
    judged_by: str = "rules"
    needs_judge: bool = False

    def store_fields(self) -> dict[str, Any]:
        """Keyword arguments for :func:`mindforge.store.trials.record_audit` (rule kept in evidence)."""
        return {
            "trial_id": self.trial_id,
            "failure_class": self.failure_class,
            "owner": self.owner,
            "evidence": {**self.evidence, "rule": self.rule},
            "judged_by": self.judged_by,
        }


def needs_audit(record: TrialRecord) -> bool:
    """True for every trial that did not get the full reward."""
    return not record.passed


def usable_for_scoring(record: TrialRecord, audit: AuditResult | None = None) -> bool:
    """True when the trial's reward is real, so it may count in a score on any split.

    Search coverage, the selection decisions, the sealed lift and training selection all
    filter trials through it (the split is chosen by the caller, not here).

    A reward is real when the verifier ran cleanly (``reward`` is not None) and neither
    the infrastructure nor the endpoint nor the harness code failed; with an audit, also
    when the failure is not owned by the infrastructure or a broken task.
    """
    if not record.has_real_reward or record.failure_class in NO_REWARD_CLASSES or record.failure_class in INFRA_CLASSES:
        return False
    return audit is None or audit.owner not in (AuditOwner.INFRA, AuditOwner.TASK)


def usable_for_training(record: TrialRecord, audit: AuditResult | None = None) -> bool:
    """:func:`usable_for_scoring`, and the model actually acted (a model trial with turns).

    A trial without model turns has no trajectory tokens to train on.
    """
    return usable_for_scoring(record, audit) and record.agent == "model" and record.num_turns > 0


def _ranges(lines: list[int]) -> list[list[int]]:
    """Group sorted 1-based line numbers into inclusive ``[start, end]`` ranges."""
    out: list[list[int]] = []
    for line in sorted(set(lines)):
        if out and line == out[-1][1] + 1:
            out[-1][1] = line
        else:
            out.append([line, line])
    return out


def _indexed(events: list[dict[str, Any]], kind: str) -> list[tuple[int, dict[str, Any]]]:
    return [(i + 1, ev) for i, ev in enumerate(events) if ev.get("event") == kind]


def _exit_code(content: str) -> int | None:
    match = _EXIT_RE.match(content or "")
    return int(match.group(1)) if match else None


def _observed_exit(ev: dict[str, Any]) -> int | None:
    """An observation's exit code: the recorded ``exit_code`` fact, else read from the text.

    The agent loop records the fact for every bash observation, whatever the contract's
    observation style shows (``tools.show_exit_code``, the shell formats' terminal style).
    """
    if "exit_code" in ev:
        return ev["exit_code"]
    return _exit_code(str(ev.get("content", "")))


def _action_key(ev: dict[str, Any]) -> str:
    return f"{ev.get('tool')}:{json.dumps(ev.get('arguments'), sort_keys=True, default=str)}"


def _progressing(events: list[dict[str, Any]]) -> tuple[bool, list[int], str]:
    """Whether the last actions still changed things, the lines looked at, and why."""
    actions = [(n, ev) for n, ev in _indexed(events, "action") if ev.get("tool") != "finish"][-PROGRESS_WINDOW:]
    if len(actions) < 2:
        return False, [n for n, _ in actions], "fewer than two actions before the limit"
    first = actions[0][0]
    observations = [(n, ev) for n, ev in _indexed(events, "observation") if n > first]
    lines = [n for n, _ in actions] + [n for n, _ in observations]
    distinct_actions = len({_action_key(ev) for _, ev in actions})
    texts = [re.sub(r"\[turn \d+/\d+;.*?\]", "", str(ev.get("content", ""))) for _, ev in observations]
    if distinct_actions < 2 or len(set(texts)) < 2:
        return False, lines, f"the last {len(actions)} actions repeat ({distinct_actions} distinct)"
    ok = sum(1 for _, ev in observations if _observed_exit(ev) == 0)
    ok += sum(1 for _, ev in actions if ev.get("tool") == "write_file")
    if ok == 0:
        return False, lines, f"none of the last {len(actions)} actions succeeded"
    return True, lines, f"{distinct_actions} distinct actions among the last {len(actions)}, {ok} succeeded"


def _result(record: TrialRecord, owner: AuditOwner, rule: str, detail: str, lines=(), **extra: Any) -> AuditResult:
    cls = record.failure_class or FailureClass.TASK_FAILED
    limits = [record.limit_fired.value] if record.limit_fired is not None else []
    evidence = {"lines": _ranges(list(lines)), "limits_fired": limits, "detail": detail}
    needs_judge = bool(extra.pop("needs_judge", False))
    evidence.update(extra)
    return AuditResult(
        trial_id=record.trial_id, failure_class=cls, owner=owner, rule=rule, evidence=evidence, needs_judge=needs_judge
    )


def _class_rules(record: TrialRecord, task_verdict: str | None, end_lines: list[int]) -> AuditResult | None:
    cls = record.failure_class
    if cls in INFRA_CLASSES:
        return _result(record, AuditOwner.INFRA, f"infra.{cls.value}", record.failure_detail, end_lines)
    if task_verdict in TASK_VERDICTS:
        return _result(
            record, AuditOwner.TASK, f"task.known_{task_verdict}", f"task validation marked the task {task_verdict}"
        )
    if record.limit_fired is LimitFired.PIDS_LIMIT:
        # the processes filling the sandbox are the agent's: the verifier (or the agent
        # itself) could not fork, whatever the failure class says about the verifier
        return _result(record, AuditOwner.MODEL, "model.pids_exhausted", record.failure_detail, end_lines)
    if cls in TASK_CLASSES:
        return _result(record, AuditOwner.TASK, f"task.{cls.value}", record.failure_detail, end_lines)
    return None


def _tool_missing(record: TrialRecord, events: list[dict[str, Any]]) -> AuditResult | None:
    hits = [(n, ev) for n, ev in _indexed(events, "unusable_reply") if "not available" in str(ev.get("reason", ""))]
    if not hits:
        return None
    tools = sorted({m.group(1) for _, ev in hits if (m := _NOT_AVAILABLE_RE.search(str(ev["reason"]))) and m.group(1)})
    detail = f"the model asked for a tool the contract does not allow ({', '.join(tools) or 'unnamed'})"
    return _result(record, AuditOwner.CONFIG, "config.tool_missing", detail, [n for n, _ in hits], tools=tools)


def _output_cut(record: TrialRecord, events: list[dict[str, Any]], contract: Any) -> AuditResult | None:
    observations = _indexed(events, "observation")[-RECENT_OBSERVATIONS:]
    cut = [(n, int(m.group(1))) for n, ev in observations if (m := _OMITTED_RE.search(str(ev.get("content", ""))))]
    if not cut:
        return None
    cap = contract.tools.max_observation_bytes if contract is not None else None
    omitted = sum(b for _, b in cut)
    detail = f"{omitted} bytes of output were cut by the observation cap ({cap} bytes) just before the end"
    return _result(
        record,
        AuditOwner.CONFIG,
        "config.output_cut",
        detail,
        [n for n, _ in cut],
        omitted_bytes=omitted,
        max_observation_bytes=cap,
    )


def _limit_rule(record: TrialRecord, events: list[dict[str, Any]], end_lines: list[int]) -> AuditResult | None:
    if record.failure_class not in LIMIT_CLASSES and record.limit_fired not in _LIMITS:
        return None
    recent = [n for n, ev in enumerate(events, 1) if ev.get("event") in ("reply", "unusable_reply")][-PROGRESS_WINDOW:]
    unusable = [n for n in recent if events[n - 1].get("event") == "unusable_reply"]
    if recent and len(unusable) * 2 >= len(recent):
        detail = f"{len(unusable)} of the last {len(recent)} replies could not be used when the limit fired"
        return _result(record, AuditOwner.CONFIG, "config.parse_failure", detail, unusable + end_lines)
    progressing, lines, why = _progressing(events)
    if progressing:
        return _result(record, AuditOwner.CONFIG, "config.limit_while_progressing", why, lines + end_lines)
    return _result(record, AuditOwner.MODEL, "model.stuck", why, lines + end_lines)


def _output_hidden(ev: dict[str, Any]) -> bool:
    if "output_hidden" in ev:
        return bool(ev["output_hidden"])
    content = str(ev.get("content", ""))
    return "stdout:" not in content and "stderr:" not in content


def _hidden_errors(record: TrialRecord, events: list[dict[str, Any]], contract: Any) -> AuditResult | None:
    if contract is None or contract.hooks.on_command_error != "none":
        return None
    hidden = [
        n
        for n, ev in _indexed(events, "observation")[-RECENT_OBSERVATIONS:]
        if _observed_exit(ev) not in (None, 0) and _output_hidden(ev)
    ]
    if not hidden:
        return None
    detail = "failing commands near the end were shown as an exit code only (hooks.on_command_error = 'none')"
    return _result(record, AuditOwner.CONFIG, "config.error_output_hidden", detail, hidden)


def audit_trial(
    record: TrialRecord,
    events: list[dict[str, Any]] | None,
    *,
    task_verdict: str | None = None,
    contract: Any = None,
) -> AuditResult:
    """Classify one failed trial by rules.

    Rules, first match wins: infrastructure classes; tasks known broken, flaky or
    trivially passing; the sandbox's pids limit fired (the model's: its processes filled
    the sandbox); verifier errors; a tool the model asked for is not allowed;
    unusable replies; context overflow; a turn/time/token limit (config when the last
    actions still made progress, model when they repeated or all failed); the output
    cut just before the end; error output hidden by the contract; otherwise the model
    got it wrong (flagged ``needs_judge`` when the transcript is missing or the run
    ended on failing commands, which may also be a broken environment).

    Args:
        record: the trial (must not have passed).
        events: its transcript events in file order (line ``i`` is ``events[i-1]``), or
            None when there is no transcript (oracle/nop, or the agent never started).
        task_verdict: what task validation knows about the task: ``broken``, ``flaky``,
            ``trivial`` (passes without doing anything) or None.
        contract: the HCP contract the trial ran under
            (:class:`mindforge.hcp.HCPContract`), for limits and hooks; optional.

    Returns:
        the verdict, ``judged_by = "rules"``.

    Raises:
        NotAFailureError: the trial passed.
    """
    if record.passed:
        raise NotAFailureError(f"trial {record.trial_id} passed (reward 1); only failures are audited")
    events = events or []
    end_lines = [n for n, _ in _indexed(events, "end")]
    decided = _class_rules(record, task_verdict, end_lines)
    if decided is not None:
        return decided
    if events and (found := _tool_missing(record, events)) is not None:
        return found
    cls = record.failure_class
    if cls in PARSE_CLASSES:
        lines = [n for n, _ in _indexed(events, "unusable_reply")] + end_lines
        return _result(record, AuditOwner.CONFIG, "config.parse_failure", record.failure_detail, lines)
    if cls is FailureClass.CONTEXT_OVERFLOW or record.limit_fired is LimitFired.CONTEXT_WINDOW:
        return _result(record, AuditOwner.CONFIG, "config.context_overflow", record.failure_detail, end_lines)
    found = _limit_rule(record, events, end_lines)
    if found is None and events:
        found = _output_cut(record, events, contract) or _hidden_errors(record, events, contract)
    if found is not None:
        return found
    return _model_default(record, events, end_lines)


def _model_default(record: TrialRecord, events: list[dict[str, Any]], end_lines: list[int]) -> AuditResult:
    detail = record.failure_detail or "the verifier gave a reward below 1 after a clean run"
    if not events:
        return _result(record, AuditOwner.MODEL, "model.no_transcript", detail, needs_judge=True)
    observations = _indexed(events, "observation")
    finishes = [n for n, ev in _indexed(events, "action") if ev.get("tool") == "finish"]
    tail = [(n, _observed_exit(ev)) for n, ev in observations[-2:]]
    failing_tail = len(tail) == 2 and all(code not in (None, 0) for _, code in tail)
    if failing_tail:
        lines = [n for n, _ in tail] + finishes + end_lines
        return _result(record, AuditOwner.MODEL, "model.finished_on_errors", detail, lines, needs_judge=True)
    return _result(record, AuditOwner.MODEL, "model.wrong_answer", detail, finishes + end_lines)
