"""Text the harness shows the model: system prompt, instruction, observations, hook messages.

Everything here is rendered from the HCP contract, so a change to what the model sees is a
recorded contract edit.
"""

from __future__ import annotations

import json

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


def render_system_prompt(contract, skills: list[str]) -> str:
    """System prompt from ``resources.system_prompt`` + tool list + skills + append text.

    Args:
        contract: the HCP contract.
        skills: workspace paths of the skills copied in.
    """
    res = contract.resources
    allowed = list(contract.tools.allow)
    parts = [res.system_prompt.strip()]
    if contract.tools.action_format == "json":
        lines = ["Reply with exactly one JSON object per turn, and nothing else:",
                 '{"tool": "<name>", "arguments": {...}}', "Tools:"]
        for name in allowed:
            desc, props, _req = TOOL_SPECS[name]
            lines.append(f"- {name}({', '.join(props)}): {desc}")
        parts.append("\n".join(lines))
    else:
        parts.append("Act by calling the provided tools, one call per turn: " + ", ".join(allowed) + ".")
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
    """The remaining-budget line appended to each observation."""
    return f"[turn {turn}/{max_turns}; {max(0, int(seconds_left))} s left]"


def format_exec(result: ExecResult, on_command_error: str, tail_bytes: int = 2048) -> str:
    """Observation text for a ``bash`` action.

    Args:
        result: the exec result (already capped by the observation limit).
        on_command_error: hook ``tail`` (show the last ``tail_bytes`` of output after a
            failing command), ``full`` (show all captured output) or ``none`` (exit code only).
        tail_bytes: bytes of each stream kept by the ``tail`` hook.
    """
    if result.timed_out:
        head = "command timed out (killed)"
    else:
        head = f"exit code {result.exit_code}"
    out, err = result.stdout, result.stderr
    failed = result.timed_out or result.exit_code != 0
    if failed and on_command_error == "none":
        return head
    if failed and on_command_error == "tail":
        out, err = out[-tail_bytes:], err[-tail_bytes:]
    text = head
    if out:
        text += f"\nstdout:\n{out}"
    if err:
        text += f"\nstderr:\n{err}"
    return text


def format_json_observation(tool: str, text: str) -> str:
    """Wrap an observation as the user turn of the ``json`` action format."""
    return f"Observation from {tool}:\n{text}"


def parse_error_message(reason: str, action_format: str) -> str:
    """What the model is told after an unparsable reply."""
    if action_format == "json":
        return f"Your reply could not be used: {reason}. Reply with one JSON object " + json.dumps(
            {"tool": "bash", "arguments": {"command": "ls"}}
        ) + " and nothing else."
    return f"Your reply could not be used: {reason}. Call one of the tools."
