"""The audit's optional judge: the policy endpoint decides what the audit rules could not.

:func:`mindforge.audit.audit_trial` flags a verdict ``needs_judge`` when it fell back to
a default (no transcript; the run ended on failing commands, which may also be a broken
environment). :func:`judge_audit` shows the judge model the trial's outcome, the rules'
verdict and a line-numbered digest of the transcript, parses its one-object JSON reply
strictly, and records the verdict as ``judged_by = "judge:<model>"``; an unusable reply
or a failed call keeps the rules' verdict with the reason in its evidence. An LLM as
judge of agent trajectories follows the "LLM-as-a-judge" practice (Zheng et al., 2023,
arXiv:2306.05685); the owners are those of :mod:`mindforge.audit`.
"""

from __future__ import annotations

import json
from typing import Any

from mindforge.audit import AuditResult
from mindforge.domain import AuditOwner
from mindforge.replies import ReplyFormatError, load_json_object
from mindforge.trials.record import TrialRecord

JUDGE_SYSTEM_PROMPT = """\
You audit failed attempts of an AI agent on terminal tasks. Decide who owns the failure:
- "infra": the sandbox, the network or the model endpoint failed;
- "task": the task itself is broken (its environment or tests are wrong);
- "config": the harness stood in the way (a needed tool was missing, output was cut,
  a limit stopped the agent while it was making progress, its replies could not be parsed);
- "model": the harness gave the agent what it needed and the agent still got it wrong.
Reply with exactly one JSON object and nothing else:
{"owner": "infra" | "task" | "config" | "model", "reason": "<one sentence>"}"""

#: characters of one event shown to the judge
_JUDGE_EVENT_CHARS = 400


class JudgeReplyError(ValueError):
    """The judge's reply is not the one JSON object asked for."""


def _digest(events: list[dict[str, Any]], max_events: int) -> str:
    """Short lines ``L<n> <event>: <text>`` for the last ``max_events`` meaningful events."""
    lines = []
    for n, ev in enumerate(events, 1):
        kind = ev.get("event")
        if kind == "action":
            text = f"{ev.get('tool')} {json.dumps(ev.get('arguments'), default=str)}"
        elif kind in ("observation", "harness"):
            text = str(ev.get("content", ""))
        elif kind == "unusable_reply":
            text = f"{ev.get('failure_class')}: {ev.get('reason')}"
        elif kind == "end":
            text = f"failure_class={ev.get('failure_class')} limit_fired={ev.get('limit_fired')} {ev.get('detail', '')}"
        else:
            continue
        text = text.replace("\n", "\\n")
        if len(text) > _JUDGE_EVENT_CHARS:
            text = text[: _JUDGE_EVENT_CHARS - 20] + f"... ({len(text)} chars)"
        lines.append(f"L{n} {kind}: {text}")
    return "\n".join(lines[-max_events:])


def parse_judge_reply(text: str) -> tuple[AuditOwner, str]:
    """Parse the judge's reply strictly.

    Accepts exactly one JSON object (optionally inside one ```json fence) with the keys
    ``owner`` (one of infra, task, config, model) and ``reason`` (a non-empty string),
    and no other keys.

    Raises:
        JudgeReplyError: anything else, with the reason.
    """
    try:
        obj = load_json_object(text)
    except ReplyFormatError as exc:
        raise JudgeReplyError(str(exc)) from None
    if set(obj) != {"owner", "reason"}:
        raise JudgeReplyError(f"keys must be exactly owner and reason, got {sorted(obj)}")
    if obj["owner"] not in {o.value for o in AuditOwner}:
        raise JudgeReplyError(f"owner {obj['owner']!r} is not one of infra, task, config, model")
    if not isinstance(obj["reason"], str) or not obj["reason"].strip():
        raise JudgeReplyError("reason must be a non-empty string")
    return AuditOwner(obj["owner"]), obj["reason"].strip()


def judge_audit(
    record: TrialRecord,
    events: list[dict[str, Any]] | None,
    rules_result: AuditResult,
    *,
    base_url: str,
    model: str,
    api_key: str = "EMPTY",
    timeout_sec: float = 60.0,
    max_events: int = 40,
) -> AuditResult:
    """Ask the policy endpoint (OpenAI-compatible) to decide what the rules could not.

    The judge sees the trial's outcome, the rules' verdict and a digest of the last
    ``max_events`` transcript events (each cut to a few hundred characters). Its reply
    is parsed strictly (:func:`parse_judge_reply`).

    Args:
        record: the trial.
        events: its transcript events, or None.
        rules_result: :func:`audit_trial`'s verdict.
        base_url: endpoint base URL (``.../v1``).
        model: the model (or adapter) name to ask; recorded as ``judge:<model>``.
        api_key: API key for the endpoint.
        timeout_sec: limit on the call, in seconds.
        max_events: transcript events shown.

    Returns:
        the judge's verdict (``judged_by = "judge:<model>"``, the rules' owner and rule
        kept in the evidence), or, when the reply is unusable or the call fails, the
        rules' verdict with ``judge_rejected`` in its evidence saying why.
    """
    import openai

    user = (
        f"Trial {record.trial_id}: task {record.task_id}, reward {record.reward}, "
        f"failure class {rules_result.failure_class.value}, limit fired {record.limit_fired}, "
        f"detail: {record.failure_detail[:500]}\n"
        f"Rules said: owner {rules_result.owner.value} ({rules_result.rule}).\n"
        f"Transcript digest (line numbers are evidence):\n{_digest(events or [], max_events) or '(no transcript)'}"
    )
    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=1, timeout=timeout_sec)
    try:
        resp = client.chat.completions.create(
            model=model,
            messages=[{"role": "system", "content": JUDGE_SYSTEM_PROMPT}, {"role": "user", "content": user}],
            temperature=0.0,
            max_tokens=256,
        )
        owner, reason = parse_judge_reply(resp.choices[0].message.content or "")
    except (openai.APIError, JudgeReplyError) as exc:
        why = f"{type(exc).__name__}: {str(exc)[:300]}"
        return rules_result.model_copy(update={"evidence": {**rules_result.evidence, "judge_rejected": why}})
    evidence = {
        **rules_result.evidence,
        "judge_reason": reason,
        "rules_owner": rules_result.owner.value,
        "rules_rule": rules_result.rule,
    }
    return rules_result.model_copy(
        update={"owner": owner, "evidence": evidence, "judged_by": f"judge:{model}", "needs_judge": False}
    )
