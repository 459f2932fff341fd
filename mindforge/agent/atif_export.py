"""Turn a trial transcript (JSONL events) into an ATIF trajectory (Harbor RFC 0001).

Steps: the system prompt (``system``), the contract's worked examples, the instruction
(``user``), then one ``agent`` step per model reply - its tool call and the observation
it got, and its metrics with the sampled token ids and log-probabilities when the server
returned them - and a ``user`` step for each message the harness injected (hooks,
parse-error notes). Failure class, limit and MindForge's ids go under
``extra["mindforge"]``, with the experience snapshot and the ids of the entries shown
(``experience_snapshot``, ``experience_entries``) when the contract retrieves experience.

A worked example's assistant turns were written by the harness, not sampled: they are
``agent`` steps with ``is_copied_context = true`` (the RFC's mark for context copied in;
the GRPO sample builder puts no loss on them) and ``extra["mindforge"]["example"]``; its
observations are ``user`` steps, or, in the ``tool_calls`` format, the observation of the
example step (``source_call_id`` naming its call), so the chat messages the model saw can
be rebuilt from the trajectory exactly.
"""

from __future__ import annotations

import json
from typing import Any

from mindforge.agent.actions import tool_schemas
from mindforge.atif import (
    MINDFORGE_EXTRA_KEY,
    Agent,
    FinalMetrics,
    Metrics,
    Observation,
    ObservationResult,
    Step,
    ToolCall,
    Trajectory,
)


def context_steps(messages: list[dict[str, Any]], ts: str, add: Any) -> None:
    """Steps for the first request's messages: system prompt, worked examples, instruction.

    Args:
        messages: the chat messages of the first model call, in order.
        ts: the ISO-8601 timestamp written on each step.
        add: called as ``add(**step_fields)``; appends a :class:`Step` and returns it.
    """
    example: Step | None = None
    for msg in messages:
        role, content = msg["role"], msg.get("content") or ""
        if role == "assistant":
            calls = [
                ToolCall(
                    tool_call_id=call["id"],
                    function_name=call["function"]["name"],
                    arguments=json.loads(call["function"]["arguments"] or "{}"),
                )
                for call in msg.get("tool_calls") or []
            ]
            example = add(
                timestamp=ts,
                source="agent",
                message=content,
                tool_calls=calls or None,
                is_copied_context=True,
                extra={MINDFORGE_EXTRA_KEY: {"example": True}},
            )
        elif role == "tool" and example is not None:
            result = ObservationResult(source_call_id=msg["tool_call_id"], content=content)
            earlier = example.observation.results if example.observation else []
            example.observation = Observation(results=[*earlier, result])
        else:
            add(timestamp=ts, source="system" if role == "system" else "user", message=content)


def _experience_extra(events: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"experience_snapshot", "experience_entries"}`` from the ``experience`` event; {} without one."""
    event = next((e for e in events if e["event"] == "experience"), None)
    if event is None:
        return {}
    return {"experience_snapshot": event["snapshot"], "experience_entries": list(event["entries"])}


def transcript_to_atif(
    events: list[dict[str, Any]], *, contract: Any, task_id: str, session_id: str = ""
) -> Trajectory:
    """Build the trajectory of one trial.

    Args:
        events: the transcript's events in order (``TranscriptWriter.events``).
        contract: the HCP contract that drove the trial.
        task_id: the task's id.
        session_id: the trajectory's session id (default: ``<task_id>-<contract hash[:12]>``).

    Returns:
        a valid ATIF trajectory.
    """
    steps: list[Step] = []
    pending_calls: dict[str, ToolCall] = {}

    def add(**kw: Any) -> Step:
        step = Step(step_id=len(steps) + 1, **kw)
        steps.append(step)
        return step

    first = next((e for e in events if e["event"] == "request"), None)
    if first:
        context_steps(first["messages"], first["ts"], add)
    last_agent: Step | None = None
    for ev in events:
        kind = ev["event"]
        if kind == "reply":
            last_agent = add(**_reply_fields(ev, contract))
            pending_calls.clear()
        elif kind in ("action", "observation", "unusable_reply") and last_agent is not None:
            _follow_reply(last_agent, ev, pending_calls)
        elif kind == "harness":
            add(
                timestamp=ev["ts"], source="user", message=ev["content"], extra={MINDFORGE_EXTRA_KEY: {"harness": True}}
            )
    return _trajectory(steps, events, contract=contract, task_id=task_id, session_id=session_id)


def _reply_fields(ev: dict[str, Any], contract: Any) -> dict[str, Any]:
    """The agent step of one ``reply`` event: its message, model and token metrics."""
    usage = ev.get("usage") or {}
    return {
        "timestamp": ev["ts"],
        "source": "agent",
        "model_name": contract.model.adapter or contract.model.id,
        "message": ev.get("content") or "",
        "metrics": Metrics(
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            cached_tokens=usage.get("cached_tokens"),
            prompt_token_ids=ev.get("prompt_token_ids"),
            completion_token_ids=ev.get("completion_token_ids"),
            logprobs=ev.get("logprobs"),
            extra={
                MINDFORGE_EXTRA_KEY: {"finish_reason": ev.get("finish_reason")}
                | {key: ev[key] for key in ("request_sec", "timings") if ev.get(key) is not None}
            },
        ),
    }


def _follow_reply(step: Step, ev: dict[str, Any], pending_calls: dict[str, ToolCall]) -> None:
    """Fold an ``action``, ``observation`` or ``unusable_reply`` event into the agent step it follows."""
    kind = ev["event"]
    if kind == "action":
        call = ToolCall(
            tool_call_id=ev["call_id"] or f"call_{step.step_id}",
            function_name=ev["tool"],
            arguments=ev["arguments"],
        )
        step.tool_calls = [*(step.tool_calls or []), call]
        pending_calls[call.tool_call_id] = call
    elif kind == "observation":
        call_id = ev["call_id"] or f"call_{step.step_id}"
        result = ObservationResult(source_call_id=call_id if call_id in pending_calls else None, content=ev["content"])
        results = (step.observation.results if step.observation else []) + [result]
        step.observation = Observation(results=results)
    elif kind == "unusable_reply":
        step.extra = {
            MINDFORGE_EXTRA_KEY: {"unusable_reply": {"failure_class": ev["failure_class"], "reason": ev["reason"]}}
        }


def _trajectory(
    steps: list[Step], events: list[dict[str, Any]], *, contract: Any, task_id: str, session_id: str
) -> Trajectory:
    """The trajectory around ``steps``: the agent, the totals and the outcome of the ``end`` event."""
    end: dict[str, Any] = next((e for e in reversed(events) if e["event"] == "end"), {})
    agent_steps = [s for s in steps if s.source == "agent" and not s.is_copied_context]
    return Trajectory(
        session_id=session_id or f"{task_id}-{contract.content_hash[:12]}",
        agent=Agent(
            name="mindforge-hcp",
            version=f"{contract.mindforge.name}@{contract.mindforge.revision}",
            model_name=contract.model.id,
            tool_definitions=tool_schemas(list(contract.tools.allow)),
            extra={MINDFORGE_EXTRA_KEY: {"adapter": contract.model.adapter, "contract_hash": contract.content_hash}},
        ),
        steps=steps,
        final_metrics=FinalMetrics(
            total_prompt_tokens=end.get("prompt_tokens", 0),
            total_completion_tokens=end.get("completion_tokens", 0),
            total_steps=len(steps),
        ),
        extra={
            MINDFORGE_EXTRA_KEY: {
                "task_id": task_id,
                "failure_class": end.get("failure_class"),
                "limit_fired": end.get("limit_fired"),
                "detail": end.get("detail", ""),
                "agent_steps": len(agent_steps),
                **_experience_extra(events),
            }
        },
    )
