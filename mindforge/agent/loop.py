"""The model-driven agent: an HCP contract driving a conversation over an OpenAI-compatible API.

The loop renders the system prompt, the worked examples and the instruction from the
contract, calls the endpoint with the ``openai`` SDK, turns each reply into one action
(in the contract's action format), runs it in the sandbox and feeds the observation back,
until the model calls ``finish`` or a limit fires (``workspace.max_turns``, the task's
agent timeout, ``workspace.max_total_tokens``, the context window). In ``single_command``
mode the phase ends after the first action has run. Replies that cannot be used
(unparsable, empty, cut by the length limit) and endpoint errors are their own failure
classes, never task failures.

At the end the transcript becomes an ATIF trajectory, written atomically; a trajectory
that cannot be built or written is a recorded error (a ``trajectory_error`` transcript
event and artifact, and ``agent_error`` when the phase had no failure of its own), never
a silent loss of training data.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any

import openai
from pydantic import SecretStr

from mindforge.agent import prompts
from mindforge.agent.actions import Action, ActionParseError, action_schema, parse_reply, tool_schemas
from mindforge.agent.atif_export import transcript_to_atif
from mindforge.agent.base import Agent, AgentOutcome
from mindforge.agent.endpoint import resolve_endpoint
from mindforge.agent.shell import PersistentShell
from mindforge.agent.transcript import TranscriptWriter
from mindforge.atif import write_trajectory
from mindforge.domain import FailureClass, LimitFired
from mindforge.experience.contract import shown_entries
from mindforge.sandbox.base import Sandbox
from mindforge.tasks.model import Task

#: consecutive unusable replies (of one kind) before the phase is ended
MAX_CONSECUTIVE_BAD_REPLIES = 3


class _Stop(Exception):
    def __init__(self, cls: FailureClass, detail: str, limit: LimitFired | None = None) -> None:
        super().__init__(detail)
        self.cls, self.detail, self.limit = cls, detail, limit


class ModelAgent(Agent):
    """Runs an HCP contract's harness around a policy endpoint.

    Args:
        contract: the validated HCP contract (``mindforge.hcp.HCPContract``).
        base_url: endpoint base URL (``.../v1``); default: the env var named by
            ``model.base_url_env``, else settings' ``policy_url``.
        api_key: default: for the policy endpoint the policy API key (``policy_key``, else
            settings' ``policy_api_key``), then the env var named by ``model.api_key_env``,
            else ``"EMPTY"`` (:func:`mindforge.agent.endpoint.resolve_endpoint`).
        policy_key: the policy endpoint's key where this process's settings lack it.
        request_timeout_sec: upper bound on one model call, in seconds.
        seed: the trial's sampling seed (:func:`mindforge.trials.seeds.paired_seed`), sent
            with every model call (the ``n``-th call of the trial gets ``seed + n``) unless
            the contract fixes ``provider_options.seed``; None sends none.
    """

    name = "model"

    def __init__(
        self,
        contract: Any,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        policy_key: SecretStr | None = None,
        request_timeout_sec: float = 600.0,
        seed: int | None = None,
    ) -> None:
        self.contract = contract
        self.seed = seed
        self._calls = 0
        self.contract_hash = contract.content_hash
        self.adapter = contract.model.adapter or ""
        self.base_url, self.api_key = resolve_endpoint(contract, base_url, api_key, policy_key=policy_key)
        self.request_timeout_sec = request_timeout_sec

    # ------------------------------------------------------------------ run
    def run(self, task: Task, sandbox: Sandbox, *, timeout_sec: float, artifact_dir: Path) -> AgentOutcome:
        """Drive the conversation; see :meth:`Agent.run`.

        Returns:
            the outcome with token totals, turns, the limit that fired and the
            transcript path (``artifacts["transcript"]``, plus ``trajectory`` in ATIF).
        """
        c = self.contract
        deadline = time.monotonic() + timeout_sec
        tr = TranscriptWriter(artifact_dir / "transcript.jsonl")
        out = AgentOutcome(artifacts={"transcript": str(tr.path)})
        shell = PersistentShell(sandbox, c.workspace.root, user=task.config.agent.user)
        client = openai.OpenAI(base_url=self.base_url, api_key=self.api_key, max_retries=2)
        state = _State()
        try:
            skills = self._install_skills(sandbox)
            shown = shown_entries(c, instruction=task.instruction, task_id=task.id, task_hash=task.content_hash)
            out.experience_entries = [entry.entry_id for entry in shown]
            if c.resources.experience is not None:
                tr.write("experience", snapshot=c.resources.experience.snapshot, entries=out.experience_entries)
            messages: list[dict[str, Any]] = [
                {"role": "system", "content": prompts.render_system_prompt(c, skills)},
                *prompts.render_examples(c, [entry.to_example() for entry in shown]),
                {"role": "user", "content": prompts.render_instruction(c, task.instruction)},
            ]
            if c.hooks.plan_first:
                messages[-1]["content"] += "\n\n" + prompts.PLAN_FIRST
                state.planning = True
            self._converse(client, shell, messages, deadline, tr, out, state)
        except _Stop as stop:
            out.failure_class, out.failure_detail, out.limit_fired = stop.cls, stop.detail, stop.limit
        finally:
            tr.write(
                "end",
                failure_class=out.failure_class,
                detail=out.failure_detail,
                limit_fired=out.limit_fired,
                turns=out.num_turns,
                prompt_tokens=out.prompt_tokens,
                completion_tokens=out.completion_tokens,
            )
            self._write_trajectory(tr, artifact_dir, out, task)
            tr.close()
        return out

    # --------------------------------------------------------------- helpers
    def _install_skills(self, sandbox: Sandbox) -> list[str]:
        c = self.contract
        paths = list(getattr(c.skills, "paths", []) or [])
        if not paths:
            return []
        installed = []
        for p in paths:
            target = f"{c.workspace.root.rstrip('/')}/{p}"
            sandbox.put_file(target, c.resources.resource(p).data, mode=0o755)
            installed.append(target)
        return installed

    def _call(
        self, client: openai.OpenAI, messages: list[dict[str, Any]], deadline: float, *, planning: bool = False
    ) -> Any:
        """One model call; the reply is asked to end with its first action (``stop_at_action``), unless it is a plan.

        The loop acts on the first action of a reply only, so decoding past it is wasted:
        the request names the contract's action format in the MindForge extension field
        ``stop_at_action`` (:class:`mindforge.policy.server.protocol.ChatCompletionRequest`),
        which endpoints that do not know it ignore.
        """
        c = self.contract
        opts = c.provider_options
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Stop(FailureClass.AGENT_TIMEOUT, "agent timeout reached", LimitFired.AGENT_TIMEOUT)
        kwargs: dict[str, Any] = {
            "model": c.model.adapter or c.model.id,
            "messages": messages,
            "max_tokens": c.model.max_tokens,
            "temperature": opts.temperature,
            "top_p": opts.top_p,
            "logprobs": True,
            "extra_body": {"return_token_ids": True} | ({} if planning else {"stop_at_action": c.tools.action_format}),
            "timeout": min(remaining, self.request_timeout_sec),
        }
        if getattr(opts, "seed", None) is not None:
            kwargs["seed"] = opts.seed
        elif self.seed is not None:
            kwargs["seed"] = (self.seed + self._calls) % (1 << 31)
        self._calls += 1
        if opts.stop:
            kwargs["stop"] = list(opts.stop)
        if c.tools.action_format == "tool_calls":
            kwargs["tools"] = tool_schemas(list(c.tools.allow))
        if c.tools.constrained_decoding:
            schema = action_schema(list(c.tools.allow))
            kwargs["response_format"] = {"type": "json_schema", "json_schema": {"name": "action", "schema": schema}}
        try:
            return client.chat.completions.create(**kwargs)
        except openai.APITimeoutError:
            if time.monotonic() >= deadline:
                raise _Stop(
                    FailureClass.AGENT_TIMEOUT, "agent timeout during a model call", LimitFired.AGENT_TIMEOUT
                ) from None
            raise _Stop(FailureClass.ENDPOINT_ERROR, "model call timed out") from None
        except openai.BadRequestError as exc:
            text = str(exc).lower()
            if "context" in text and ("length" in text or "window" in text or "maximum" in text):
                raise _Stop(FailureClass.CONTEXT_OVERFLOW, str(exc)[:500], LimitFired.CONTEXT_WINDOW) from None
            # the endpoint answered and refused what the harness asked for: the harness's failure
            raise _Stop(FailureClass.AGENT_ERROR, f"the endpoint refused the request: {str(exc)[:500]}") from None
        except openai.APIError as exc:
            # no answer, a 5xx, or a model/adapter the endpoint does not serve (404): the
            # endpoint failed, not the model; the trial has no reward and is run again
            raise _Stop(FailureClass.ENDPOINT_ERROR, f"{type(exc).__name__}: {str(exc)[:500]}") from None

    def _converse(
        self,
        client: openai.OpenAI,
        shell: PersistentShell,
        messages: list[dict[str, Any]],
        deadline: float,
        tr: TranscriptWriter,
        out: AgentOutcome,
        state: _State,
    ) -> None:
        c = self.contract
        max_turns = c.workspace.max_turns
        single = c.workspace.mode == "single_command"
        sent = 0
        for turn in range(1, max_turns + 1):
            tr.write("request", turn=turn, messages=messages[sent:], model=c.model.adapter or c.model.id)
            sent = len(messages)
            asked = time.monotonic()
            resp = self._call(client, messages, deadline, planning=state.planning)
            out.num_turns = turn
            choice = resp.choices[0]
            self._account(resp, out, tr, turn, choice, time.monotonic() - asked)
            msg = choice.message
            content = msg.content or ""
            tool_calls = list(msg.tool_calls or [])
            assistant: dict[str, Any] = {"role": "assistant", "content": content}
            if tool_calls:
                assistant["tool_calls"] = [tc.model_dump(exclude_none=True) for tc in tool_calls]
            messages.append(assistant)
            if state.planning:
                state.planning = False
                self._harness(messages, tr, prompts.PLAN_DONE, tool_calls)
                continue
            action = self._action_or_complaint(choice, content, tool_calls, messages, tr, state)
            if action is None:
                continue
            tr.write("action", turn=turn, tool=action.tool, arguments=action.arguments, call_id=action.call_id)
            if action.tool == "finish":
                if c.hooks.verify_before_finish and not state.verified and not single:
                    state.verified = True
                    self._observe(messages, tr, action, tool_calls, prompts.VERIFY_BEFORE_FINISH, turn, deadline)
                    continue
                return
            text, facts = self._execute(action, shell, deadline)
            self._observe(messages, tr, action, tool_calls, text, turn, deadline, facts)
            if single:
                return  # single_command mode: one action, then the verifier
        raise _Stop(FailureClass.MAX_TURNS, f"max_turns ({max_turns}) reached", LimitFired.MAX_TURNS)

    def _account(
        self, resp: Any, out: AgentOutcome, tr: TranscriptWriter, turn: int, choice: Any, request_sec: float
    ) -> None:
        """Count a reply's tokens and write its ``reply`` event.

        The event's ``usage`` carries ``cached_tokens`` (OpenAI's
        ``usage.prompt_tokens_details.cached_tokens``) when the server reports it, and the
        event carries the server's ``timings`` (llama.cpp server's shape) when it sends
        them, and ``request_sec``, the HTTP round trip in seconds.
        """
        c = self.contract
        usage = resp.usage
        p = usage.prompt_tokens if usage else 0
        k = usage.completion_tokens if usage else 0
        details = getattr(usage, "prompt_tokens_details", None) if usage else None
        cached = getattr(details, "cached_tokens", None) if details else None
        out.prompt_tokens += p
        out.completion_tokens += k
        logprobs = None
        if choice.logprobs is not None and choice.logprobs.content:
            logprobs = [t.logprob for t in choice.logprobs.content]
        tr.write(
            "reply",
            turn=turn,
            content=choice.message.content,
            tool_calls=[tc.model_dump() for tc in (choice.message.tool_calls or [])],
            finish_reason=choice.finish_reason,
            usage={"prompt_tokens": p, "completion_tokens": k}
            | ({"cached_tokens": cached} if cached is not None else {}),
            timings=getattr(resp, "timings", None),
            request_sec=request_sec,
            prompt_token_ids=getattr(resp, "prompt_token_ids", None),
            completion_token_ids=getattr(choice, "token_ids", None),
            logprobs=logprobs,
        )
        budget = getattr(c.workspace, "max_total_tokens", None)
        if budget and out.prompt_tokens + out.completion_tokens > budget:
            raise _Stop(FailureClass.TOKEN_BUDGET, f"token budget {budget} exceeded", LimitFired.TOKEN_BUDGET)
        if c.model.context_window and p + c.model.max_tokens > c.model.context_window:
            raise _Stop(
                FailureClass.CONTEXT_OVERFLOW,
                f"prompt of {p} tokens + max_tokens {c.model.max_tokens} exceeds the context window "
                f"{c.model.context_window}",
                LimitFired.CONTEXT_WINDOW,
            )

    def _action_or_complaint(self, choice, content, tool_calls, messages, tr, state) -> Action | None:
        """Parse the reply; on an unusable reply tell the model, count, and stop after too many."""
        c = self.contract
        allowed = list(c.tools.allow)
        kind: FailureClass | None = None
        reason = ""
        action = None
        if choice.finish_reason == "length":
            kind, reason = FailureClass.TRUNCATED_REPLY, "your reply was cut off by the length limit; be shorter"
        elif not content.strip() and not tool_calls:
            kind, reason = FailureClass.EMPTY_REPLY, "your reply was empty"
        else:
            try:
                action = parse_reply(c.tools.action_format, content, tool_calls, allowed, f"call_{len(messages)}")
            except ActionParseError as exc:
                kind, reason = FailureClass.PARSE_ERROR, str(exc)
        if kind is None:
            state.bad.clear()
            return action
        state.bad[kind] = state.bad.get(kind, 0) + 1
        tr.write("unusable_reply", failure_class=kind, reason=reason, count=state.bad[kind])
        if c.workspace.mode == "single_command":
            raise _Stop(kind, f"unusable reply in single_command mode: {reason}")
        if state.bad[kind] >= MAX_CONSECUTIVE_BAD_REPLIES:
            raise _Stop(kind, f"{state.bad[kind]} consecutive unusable replies: {reason}")
        self._harness(messages, tr, prompts.parse_error_message(reason, c.tools.action_format), tool_calls)
        return None

    def _execute(self, action: Action, shell: PersistentShell, deadline: float) -> tuple[str, dict[str, Any]]:
        """Run the action; returns the observation text and facts for the transcript.

        The facts of a ``bash`` action are its ``exit_code`` (None on a timeout) and
        whether the error hook hid its output (``output_hidden``): audits read them
        there, whatever the observation style shows.
        """
        c = self.contract
        cap, truncation = c.tools.max_observation_bytes, c.tools.observation_truncation
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Stop(FailureClass.AGENT_TIMEOUT, "agent timeout reached", LimitFired.AGENT_TIMEOUT)
        if action.tool == "bash":
            res = shell.run(
                action.arguments["command"],
                timeout_sec=max(1.0, min(c.tools.bash_timeout_sec, remaining)),
                max_output_bytes=cap,
                truncation=truncation,
            )
            facts = {"exit_code": res.exit_code, "output_hidden": prompts.output_hidden(res, c.hooks.on_command_error)}
            return prompts.format_bash_observation(c, res), facts
        if action.tool == "read_file":
            path = shell.resolve(action.arguments["path"])
            res = shell.run(
                f"cat -- '{path}'",
                timeout_sec=min(30.0, max(1.0, remaining)),
                max_output_bytes=cap,
                truncation=truncation,
            )
            return (res.stdout if res.ok else prompts.format_exec(res, "full")), {}
        if action.tool == "write_file":
            path = shell.resolve(action.arguments["path"])
            data = action.arguments["content"].encode()
            shell.sandbox.put_file(path, data)
            return f"wrote {len(data)} bytes to {path}", {}
        raise ActionParseError(f"unknown tool {action.tool}")  # unreachable: parse checks names

    def _observe(
        self, messages, tr, action: Action, tool_calls, text: str, turn: int, deadline: float, facts=None
    ) -> None:
        c = self.contract
        if c.tools.show_turn_budget:
            text = text + "\n" + prompts.budget_line(turn, c.workspace.max_turns, deadline - time.monotonic())
        tr.write("observation", turn=turn, tool=action.tool, call_id=action.call_id, content=text, **(facts or {}))
        if c.tools.action_format == "tool_calls":
            for tc in tool_calls:
                body = text if tc.id == action.call_id else "ignored: one tool call per turn"
                messages.append({"role": "tool", "tool_call_id": tc.id, "content": body})
        else:
            messages.append(prompts.observation_message(c, action.tool, text))

    def _harness(self, messages, tr, text: str, tool_calls) -> None:
        tr.write("harness", content=text)
        for tc in tool_calls:  # every native call needs an answer before the next user turn
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": "not run"})
        messages.append({"role": "user", "content": text})

    def _write_trajectory(self, tr: TranscriptWriter, artifact_dir: Path, out: AgentOutcome, task: Task) -> None:
        """Write the ATIF trajectory atomically; a failure is recorded, never swallowed.

        On failure: a ``trajectory_error`` transcript event, ``trajectory_error.txt``
        (the traceback) as the ``trajectory_error`` artifact, and, when the phase had no
        failure of its own, failure class ``agent_error`` (the harness code failed).
        """
        path = artifact_dir / "trajectory.json"
        try:
            traj = transcript_to_atif(tr.events, contract=self.contract, task_id=task.id)
            write_trajectory(traj, path)
        except Exception as exc:  # noqa: BLE001 - any failure here loses training data: record it
            detail = f"trajectory not written: {type(exc).__name__}: {str(exc)[:300]}"
            tr.write("trajectory_error", detail=detail)
            error_path = artifact_dir / "trajectory_error.txt"
            try:
                error_path.write_text(traceback.format_exc(), encoding="utf-8")
                out.artifacts["trajectory_error"] = str(error_path)
            except OSError:
                pass  # the transcript event and the failure detail still say it
            if out.failure_class is None:
                out.failure_class, out.failure_detail = FailureClass.AGENT_ERROR, detail
            else:
                out.failure_detail = f"{out.failure_detail}; {detail}"
            return
        out.artifacts["trajectory"] = str(path)


class _State:
    def __init__(self) -> None:
        self.planning = False
        self.verified = False
        self.bad: dict[FailureClass, int] = {}
