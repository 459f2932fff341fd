"""Text the harness shows the model: system prompt, worked examples, instruction, observations, hook messages.

Everything here is rendered from the HCP contract, so a change to what the model sees is a
recorded contract edit. The action format (``tools.action_format``) decides how an action
is written (a JSON object, a native tool call, a fenced bash block, a bare command line)
and how its observation comes back; :func:`render_action` and :func:`observation_message`
are used both for the live conversation and for the worked examples, so the examples show
exactly the shape the model must produce and will see.
"""

from __future__ import annotations

import json
from typing import Any

from mindforge.agent.actions import TOOL_SPECS
from mindforge.sandbox.base import ExecResult

DEFAULT_INSTRUCTION_TEMPLATE = "{instruction}"

PLAN_FIRST = (
    "Before taking any action, write a short numbered plan for this task. "
    "Do not call a tool in this reply."
)
PLAN_DONE = "Good. Now carry out the plan, one action per reply."
VERIFY_BEFORE_FINISH = (
    "Before finishing: check your work. Run a command that shows the result meets every "
    "requirement of the task, then call finish again."
)
#: what the finish action is written as in the shell formats (``fenced_bash``, ``command``)
SHELL_FINISH_REPLY = "done"
#: the tool result the ``tool_calls`` format's example finish calls get (the API needs one)
EXAMPLE_FINISH_RESULT = "finished"
#: the observation shown when a command printed nothing and its exit code is hidden
NO_OUTPUT = "(no output)"


def _finish_offered(contract) -> bool:
    return "finish" in contract.tools.allow and contract.workspace.mode == "multi_turn"


def _format_section(contract) -> str:
    fmt, allowed = contract.tools.action_format, list(contract.tools.allow)
    done = f"When the task is done, reply with: {SHELL_FINISH_REPLY}" if _finish_offered(contract) else ""
    session = (
        "It runs in a persistent bash session (the working directory and exported variables carry over); "
        "its output comes back in the next message."
    )
    if fmt == "json":
        lines = ["Reply with exactly one JSON object per turn, and nothing else:"]
        lines += ['{"tool": "<name>", "arguments": {...}}', "Tools:"]
        for name in allowed:
            desc, props, _req = TOOL_SPECS[name]
            lines.append(f"- {name}({', '.join(props)}): {desc}")
        return "\n".join(lines)
    if fmt == "fenced_bash":
        lines = ["Reply with one bash command in a fenced code block, like this:", "```bash", "ls -la", "```", session]
        return "\n".join([*lines, done] if done else lines)
    if fmt == "command":
        lines = [
            ("Reply with exactly one shell command line and nothing else: no explanation, no code fences, "
             'no "$" prompt.'),
            session,
        ]
        return "\n".join([*lines, done] if done else lines)
    return "Act by calling the provided tools, one call per turn: " + ", ".join(allowed) + "."


def render_system_prompt(contract, skills: list[str]) -> str:
    """System prompt from ``resources.system_prompt`` + action format + mode + skills + append text.

    Args:
        contract: the HCP contract.
        skills: workspace paths of the skills copied in.
    """
    res = contract.resources
    parts = [res.system_prompt.strip(), _format_section(contract)]
    if contract.workspace.mode == "single_command":
        shell = contract.tools.action_format in ("fenced_bash", "command")
        one = "command (chain steps with &&)" if shell else "action"
        parts.append(f"You get exactly one {one}: make it do the whole task. It is checked as soon as it has run.")
    if skills:
        parts.append(
            "Skills (helper scripts already in the workspace; run them with bash):\n"
            + "\n".join(f"- {p}" for p in skills)
        )
    if res.append_system_prompt.strip():
        parts.append(res.append_system_prompt.strip())
    return "\n\n".join(p for p in parts if p)


def render_instruction(contract, instruction: str) -> str:
    """The first user message: the task's instruction through the contract's template."""
    template = getattr(contract.resources, "instruction_template", "") or DEFAULT_INSTRUCTION_TEMPLATE
    return template.replace("{instruction}", instruction.strip())


def budget_line(turn: int, max_turns: int, seconds_left: float) -> str:
    """The remaining-budget line appended to each observation (``tools.show_turn_budget``)."""
    return f"[turn {turn}/{max_turns}; {max(0, int(seconds_left))} s left]"


def output_hidden(result: ExecResult, on_command_error: str) -> bool:
    """Whether ``hooks.on_command_error = "none"`` hides this result's output."""
    failed = result.timed_out or result.exit_code != 0
    return failed and on_command_error == "none" and bool(result.stdout or result.stderr)


def format_exec(
    result: ExecResult,
    on_command_error: str,
    tail_bytes: int = 2048,
    *,
    plain: bool = False,
    show_exit_code: bool = True,
) -> str:
    """Observation text for a ``bash`` action.

    Args:
        result: the exec result (already capped by the observation limit).
        on_command_error: hook ``tail`` (show the last ``tail_bytes`` of output after a
            failing command), ``full`` (show all captured output) or ``none`` (exit code only).
        tail_bytes: bytes of each stream kept by the ``tail`` hook.
        plain: terminal style (the shell formats): the output as printed, stdout then
            stderr, then ``[exit code N]``; otherwise labelled: ``exit code N`` first,
            then ``stdout:`` and ``stderr:`` sections (the ``json``/``tool_calls`` style).
        show_exit_code: show the exit code (``tools.show_exit_code``); a timeout is
            always shown.

    Returns:
        the text; ``(no output)`` when nothing at all would be shown.
    """
    if result.timed_out:
        status = "command timed out (killed)"
    else:
        status = f"exit code {result.exit_code}" if show_exit_code else ""
    out, err = result.stdout, result.stderr
    failed = result.timed_out or result.exit_code != 0
    if failed and on_command_error == "none":
        out = err = ""
    elif failed and on_command_error == "tail":
        out, err = out[-tail_bytes:], err[-tail_bytes:]
    if plain:
        body = out if not err else (out + ("" if not out or out.endswith("\n") else "\n") + err)
        parts = [body.rstrip("\n")] if body.strip() else []
        if status:
            parts.append(f"[{status}]")
        return "\n".join(parts) or NO_OUTPUT
    parts = [status] if status else []
    if out:
        parts.append(f"stdout:\n{out}")
    if err:
        parts.append(f"stderr:\n{err}")
    return "\n".join(parts) or NO_OUTPUT


def format_bash_observation(contract, result: ExecResult) -> str:
    """:func:`format_exec` with the contract's hook, style and ``tools.show_exit_code``."""
    return format_exec(
        result,
        contract.hooks.on_command_error,
        plain=contract.tools.action_format in ("fenced_bash", "command"),
        show_exit_code=contract.tools.show_exit_code,
    )


def format_json_observation(tool: str, text: str) -> str:
    """Wrap an observation as the user turn of the ``json`` action format."""
    return f"Observation from {tool}:\n{text}"


def observation_message(contract, tool: str, text: str, call_id: str = "") -> dict[str, Any]:
    """The message that carries an observation back, in the contract's action format.

    ``tool_calls``: a ``tool`` message answering ``call_id``; ``json``: a user message
    ``Observation from <tool>:``; ``fenced_bash``: a user message ``Output:``;
    ``command``: the bare text, as a terminal shows it.
    """
    fmt = contract.tools.action_format
    if fmt == "tool_calls":
        return {"role": "tool", "tool_call_id": call_id, "content": text}
    if fmt == "json":
        return {"role": "user", "content": format_json_observation(tool, text)}
    if fmt == "fenced_bash":
        return {"role": "user", "content": f"Output:\n{text}"}
    return {"role": "user", "content": text}


def render_action(contract, tool: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    """The assistant message that takes ``tool(arguments)`` in the contract's action format.

    Args:
        contract: the HCP contract.
        tool: ``bash`` or ``finish`` (the shell formats know no other tool).
        arguments: the tool's arguments (``{"command": ...}`` for bash).
        call_id: the native call id (``tool_calls`` format).

    Returns:
        an OpenAI chat message with role ``assistant``.

    Raises:
        ValueError: a tool other than bash or finish in a shell format.
    """
    fmt = contract.tools.action_format
    if fmt == "tool_calls":
        call = {"id": call_id, "type": "function", "function": {"name": tool, "arguments": json.dumps(arguments)}}
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    if fmt == "json":
        return {"role": "assistant", "content": json.dumps({"tool": tool, "arguments": arguments}, ensure_ascii=False)}
    if tool == "finish":
        return {"role": "assistant", "content": SHELL_FINISH_REPLY}
    if tool != "bash":
        raise ValueError(f"the {fmt} action format has no tool {tool!r}")
    command = arguments["command"]
    return {"role": "assistant", "content": f"```bash\n{command}\n```" if fmt == "fenced_bash" else command}


def render_examples(contract, retrieved: list[Any] | None = None) -> list[dict[str, Any]]:
    """The contract's worked examples (``resources.examples``), then ``retrieved``, as few-shot chat turns.

    Each example is a user turn (its instruction through ``resources.instruction_template``)
    followed, in ``multi_turn`` mode, by one assistant action and one observation per step
    (rendered as live ones are, without the turn-budget line) and a final ``finish`` when
    the contract allows it; in ``single_command`` mode, or with ``resources.example_style``
    ``compact``, by one assistant action whose command is the steps joined with `` && ``
    and no observation. The contract's own examples come first and the retrieved ones
    last, so every trial of a contract shares the prompt's prefix up to the retrieved
    examples (the engine then reuses its cells).

    Args:
        contract: the HCP contract.
        retrieved: worked examples retrieved for this task from the contract's experience
            snapshot (``mindforge.experience.contract.shown_entries``, as ``to_example()``),
            shown after the contract's own, best last (nearest the task); None = none.

    Returns:
        the messages to put between the system prompt and the task's instruction; ``[]``
        without examples.
    """
    messages: list[dict[str, Any]] = []
    examples = [*contract.resources.examples, *reversed(retrieved or [])]
    for i, example in enumerate(examples):
        messages.append({"role": "user", "content": render_instruction(contract, example.instruction)})
        if contract.workspace.mode == "single_command" or contract.resources.example_style == "compact":
            command = " && ".join(c.strip() for c in example.commands)
            messages.append(render_action(contract, "bash", {"command": command}, f"example_{i}_0"))
            continue
        for j, step in enumerate(example.steps):
            call_id = f"example_{i}_{j}"
            messages.append(render_action(contract, "bash", {"command": step.command.strip()}, call_id))
            text = format_bash_observation(contract, ExecResult(exit_code=step.exit_code, stdout=step.output))
            messages.append(observation_message(contract, "bash", text, call_id))
        if "finish" in contract.tools.allow:
            call_id = f"example_{i}_finish"
            messages.append(render_action(contract, "finish", {}, call_id))
            if contract.tools.action_format == "tool_calls":
                messages.append(observation_message(contract, "finish", EXAMPLE_FINISH_RESULT, call_id))
    return messages


def parse_error_message(reason: str, action_format: str) -> str:
    """What the model is told after an unparsable reply."""
    if action_format == "json":
        return f"Your reply could not be used: {reason}. Reply with one JSON object " + json.dumps(
            {"tool": "bash", "arguments": {"command": "ls"}}
        ) + " and nothing else."
    if action_format == "fenced_bash":
        return f"Your reply could not be used: {reason}. Reply with one command in a fenced block:\n```bash\nls\n```"
    if action_format == "command":
        return f"Your reply could not be used: {reason}. Reply with one shell command line and nothing else."
    return f"Your reply could not be used: {reason}. Call one of the tools."
