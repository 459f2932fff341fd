"""Actions the model can take, and how replies are turned into them.

Two action formats, chosen by the HCP contract's ``tools.action_format``:

* ``json``: the reply carries one JSON object ``{"tool": NAME, "arguments": {...}}``
  (bare or in a fenced block); small models follow this more reliably than native calls.
* ``tool_calls``: native OpenAI function calling; the first tool call is taken.

Parsing is strict: a reply that names an unknown or disallowed tool, or lacks a required
argument, is an :class:`ActionParseError`, never patched silently.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, Field

#: tool name -> (description, JSON-schema properties, required argument names)
TOOL_SPECS: dict[str, tuple[str, dict[str, Any], list[str]]] = {
    "bash": (
        "Run a bash command in the persistent terminal session (cwd and exported variables carry over).",
        {"command": {"type": "string", "description": "The bash command line."}},
        ["command"],
    ),
    "read_file": (
        "Read a text file (path relative to the workspace root, or absolute).",
        {"path": {"type": "string"}},
        ["path"],
    ),
    "write_file": (
        "Write a text file, replacing it (parents are created).",
        {"path": {"type": "string"}, "content": {"type": "string"}},
        ["path", "content"],
    ),
    "finish": (
        "Declare the task done; the agent phase ends.",
        {"summary": {"type": "string", "description": "One line on what was done."}},
        [],
    ),
}


class ActionParseError(ValueError):
    """The reply could not be turned into an allowed action."""


class Action(BaseModel):
    """One tool invocation.

    Attributes:
        tool: ``bash`` | ``read_file`` | ``write_file`` | ``finish``.
        arguments: the tool's arguments (strings).
        call_id: the native tool-call id (``tool_calls`` format), else a generated one.
    """

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    call_id: str = ""


def tool_schemas(allowed: list[str]) -> list[dict[str, Any]]:
    """OpenAI ``tools`` parameter for the allowed tools."""
    out = []
    for name in allowed:
        desc, props, required = TOOL_SPECS[name]
        out.append(
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": desc,
                    "parameters": {"type": "object", "properties": props, "required": required},
                },
            }
        )
    return out


def _check(tool: Any, arguments: Any, allowed: list[str], call_id: str) -> Action:
    if not isinstance(tool, str) or not tool:
        raise ActionParseError('the action has no "tool" name')
    if tool not in allowed:
        raise ActionParseError(f"tool {tool!r} is not available; available tools: {', '.join(allowed)}")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ActionParseError(f'"arguments" of {tool} must be an object')
    _desc, props, required = TOOL_SPECS[tool]
    for name in required:
        if name not in arguments:
            raise ActionParseError(f"tool {tool} needs argument {name!r}")
    for name, value in arguments.items():
        if name in props and props[name]["type"] == "string" and not isinstance(value, str):
            raise ActionParseError(f"argument {name!r} of {tool} must be a string")
    return Action(tool=tool, arguments=arguments, call_id=call_id)


_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


def parse_json_action(text: str, allowed: list[str], call_id: str = "") -> Action:
    """Parse a ``json``-format reply.

    Args:
        text: the reply's content.
        allowed: tool names the contract allows.
        call_id: id to give the action.

    Raises:
        ActionParseError: no JSON object, unknown tool, missing or mistyped argument.
    """
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch == "{":
            try:
                obj, _end = decoder.raw_decode(text[i:])
            except json.JSONDecodeError:
                continue
            candidates.append(json.dumps(obj))
            break
    for raw in candidates:
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and ("tool" in obj or "name" in obj):
            args = obj.get("arguments", obj.get("args"))
            return _check(obj.get("tool", obj.get("name")), args, allowed, call_id)
    raise ActionParseError('no JSON action found; reply with one object {"tool": ..., "arguments": {...}}')


def parse_tool_call(tool_calls: list[Any], allowed: list[str]) -> Action:
    """Take the first native tool call of a reply.

    Args:
        tool_calls: ``message.tool_calls`` from the OpenAI SDK (objects or dicts).
        allowed: tool names the contract allows.

    Raises:
        ActionParseError: no tool call, arguments not JSON, unknown tool, bad arguments.
    """
    if not tool_calls:
        raise ActionParseError("the reply made no tool call; call one of the tools")
    call = tool_calls[0]
    fn = call["function"] if isinstance(call, dict) else call.function
    name = fn["name"] if isinstance(fn, dict) else fn.name
    raw = fn["arguments"] if isinstance(fn, dict) else fn.arguments
    call_id = call["id"] if isinstance(call, dict) else call.id
    try:
        args = json.loads(raw) if isinstance(raw, str) and raw.strip() else (raw or {})
    except json.JSONDecodeError as exc:
        raise ActionParseError(f"arguments of {name} are not valid JSON: {exc}") from None
    return _check(name, args, allowed, call_id or "")
