"""Actions the model can take, and how replies are turned into them.

Four action formats, chosen by the HCP contract's ``tools.action_format``:

* ``json``: the reply carries one JSON object ``{"tool": NAME, "arguments": {...}}``
  (bare or in a fenced block).
* ``tool_calls``: native OpenAI function calling; the first tool call is taken.
* ``fenced_bash``: the reply's first fenced block tagged ``bash``, ``sh``, ``shell`` or
  untagged is one bash command (it may span lines); a block the reply ends inside (a
  stop sequence cut the closing fence) runs to the end of the reply.
* ``command``: completion style; the reply's first non-empty line is the command
  (fence lines skipped, a leading ``$ `` and surrounding backticks stripped, the rest
  of the reply ignored). Small models that cannot keep to a JSON schema can do this.

In the two shell formats the reply ``done`` or ``exit`` (case-insensitive, a final
``.`` allowed; for ``fenced_bash`` as the whole reply or as the block) is the ``finish``
action when the contract allows ``finish``.

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


def action_schema(allowed: list[str]) -> dict[str, Any]:
    """The JSON Schema of one ``json``-format action over the allowed tools.

    One ``anyOf`` branch per tool: ``{"tool": NAME, "arguments": {...}}`` with that tool's
    string arguments (required ones required, no others). Sent as the OpenAI
    ``response_format`` ``{"type": "json_schema", ...}`` when the contract sets
    ``tools.constrained_decoding``; llama.cpp turns it into a grammar, so a reply is
    one action and ends where its object closes.

    Args:
        allowed: tool names the contract allows (keys of :data:`TOOL_SPECS`).

    Returns:
        the schema (a dict); ``{"anyOf": [...]}`` with one branch per allowed tool.
    """
    branches = []
    for name in allowed:
        _desc, props, required = TOOL_SPECS[name]
        arguments = {
            "type": "object",
            "properties": {arg: {"type": spec["type"]} for arg, spec in props.items()},
            "required": list(required),
            "additionalProperties": False,
        }
        branches.append(
            {
                "type": "object",
                "properties": {"tool": {"const": name}, "arguments": arguments},
                "required": ["tool", "arguments"],
                "additionalProperties": False,
            }
        )
    return {"anyOf": branches}


def _check(tool: Any, arguments: Any, allowed: list[str], call_id: str) -> Action:
    if not isinstance(tool, str) or not tool:
        raise ActionParseError('the action has no "tool" name')
    if tool not in allowed:
        shown = repr(tool) if len(tool) <= 80 else f"{tool[:60]!r}... ({len(tool)} characters)"
        raise ActionParseError(f"tool {shown} is not available; available tools: {', '.join(allowed)}")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ActionParseError(f'"arguments" of {tool} must be an object')
    _desc, props, required = TOOL_SPECS[tool]
    for name in required:
        if name not in arguments:
            raise ActionParseError(f"tool {tool} needs argument {name[:80]!r}")
    for name, value in arguments.items():
        if name in props and props[name]["type"] == "string" and not isinstance(value, str):
            raise ActionParseError(f"argument {name!r} of {tool} must be a string")
    return Action(tool=tool, arguments=arguments, call_id=call_id)


def _json_action_object(text: str) -> tuple[dict[str, Any], int] | None:
    """The JSON action object of a ``json``-format reply and the index just past it, or None.

    The action is the object, among every ``{`` of ``text`` that starts a complete JSON
    object naming a ``tool`` (or ``name``), that **ends first** (ties: the one that starts
    first). Ending first is what makes the rule hold on a reply cut short: the text up to
    that end holds the same action, so the engine may stop decoding there
    (:func:`action_end`). A fenced ```` ```json ```` block is found the same way, through
    the ``{`` inside it.
    """
    # strict=False: a command string may hold a raw newline (a multi-line command), which
    # a grammar-constrained reply can contain
    decoder = json.JSONDecoder(strict=False)
    best: tuple[dict[str, Any], int] | None = None
    start = text.find("{")
    while start != -1 and (best is None or start < best[1]):
        try:
            obj, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):  # not JSON, too deep, or a number past the digit limit
            obj, end = None, 0
        if isinstance(obj, dict) and ("tool" in obj or "name" in obj) and (best is None or end < best[1]):
            best = (obj, end)
        start = text.find("{", start + 1)
    return best


def parse_json_action(text: str, allowed: list[str], call_id: str = "") -> Action:
    """Parse a ``json``-format reply: its first JSON action object (see :func:`_json_action_object`).

    Args:
        text: the reply's content.
        allowed: tool names the contract allows.
        call_id: id to give the action.

    Raises:
        ActionParseError: no JSON action object, unknown tool, missing or mistyped argument.
    """
    found = _json_action_object(text)
    if found is None:
        raise ActionParseError('no JSON action found; reply with one object {"tool": ..., "arguments": {...}}')
    obj = found[0]
    args = obj.get("arguments", obj.get("args"))
    return _check(obj.get("tool", obj.get("name")), args, allowed, call_id)


#: replies that are the ``finish`` action in the shell formats (lower-cased, final "." dropped)
FINISH_REPLIES = frozenset({"done", "exit"})
#: fence info strings whose block ``fenced_bash`` takes as a command ("" = untagged)
SHELL_FENCE_TAGS = frozenset({"bash", "sh", "shell", ""})
_INLINE_FENCE = re.compile(r"```(?:(bash|sh|shell)[ \t]+)?(.+?)```")


def _shell_action(command: str, allowed: list[str], call_id: str) -> Action:
    if command.lower().rstrip(".").strip() in FINISH_REPLIES and "finish" in allowed:
        return Action(tool="finish", arguments={}, call_id=call_id)
    return _check("bash", {"command": command}, allowed, call_id)


def first_shell_block(text: str) -> str | None:
    """The content of the first ``bash``/``sh``/``shell``/untagged fenced block of ``text``.

    Blocks with another tag (```` ```python ````) are skipped whole. A block still open
    at the end of the text runs to its end. A one-line block (```` ```bash ls``` ````)
    counts too.

    Returns:
        the block's content (not stripped), or None when there is no such block.
    """
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line.startswith("```"):
            continue
        inline = _INLINE_FENCE.fullmatch(line)
        if inline and len(line) > 6:
            return inline.group(2)
        tag = line[3:].strip().lower()
        body: list[str] = []
        while i < len(lines) and not lines[i].strip().startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence (or past the end)
        if tag in SHELL_FENCE_TAGS:
            return "\n".join(body)
    return None


def _command_line_end(text: str) -> int | None:
    """Index just past the line ``parse_command`` takes (first non-empty, non-fence), once that line has ended."""
    pos = 0
    for raw in text.splitlines(keepends=True):
        pos += len(raw)
        line = raw.strip()
        if line and not line.startswith("```"):
            return pos if raw.rstrip("\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029") != raw else None
    return None


def _shell_block_end(text: str) -> int | None:
    """Index just past the closing fence of the block :func:`first_shell_block` takes, once it has closed."""
    lines = text.splitlines(keepends=True)
    pos, i = 0, 0
    while i < len(lines):
        raw = lines[i]
        line = raw.strip()
        i += 1
        pos += len(raw)
        if not line.startswith("```"):
            continue
        if raw == raw.rstrip("\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"):
            return None  # an opening fence line still being written: inline or a block's start, not known yet
        if _INLINE_FENCE.fullmatch(line) and len(line) > 6:
            return pos
        tag = line[3:].strip().lower()
        while i < len(lines) and not lines[i].strip().startswith("```"):
            pos += len(lines[i])
            i += 1
        if i == len(lines):
            return None  # the block is still open
        closing = lines[i]
        if tag in SHELL_FENCE_TAGS:
            return pos + closing.index("```") + 3
        pos += len(closing)
        i += 1
    return None


def action_end(action_format: str, text: str) -> int | None:
    """Where the action a reply's parser takes ends, once the reply holds all of it; None before that.

    The agent acts on the first action of a reply only, so an engine may stop decoding at
    this index: the parser of ``action_format`` takes the same action from
    ``text[:end]`` (plus whatever the last token added) as from any longer reply that
    starts with it. ``json``: the end of the first-ending JSON action object
    (:func:`parse_json_action`); ``fenced_bash``: the closing fence of the first shell block;
    ``command``: the newline ending the first command line. A reply whose action is its
    whole text (``done`` in the shell formats, or a block left open) has no end short of
    the end of the reply. ``tool_calls`` is the server's format: see
    :func:`mindforge.policy.server.protocol.tool_call_end`.

    Args:
        action_format: ``json``, ``fenced_bash`` or ``command``.
        text: the reply so far.

    Returns:
        the index in ``text`` just past the action, or None while it is incomplete.

    Raises:
        ValueError: another action format.
    """
    if action_format == "json":
        found = _json_action_object(text)
        return None if found is None else found[1]
    if action_format == "fenced_bash":
        return _shell_block_end(text)
    if action_format == "command":
        return _command_line_end(text)
    raise ValueError(f"no action end for action format {action_format!r}")


def parse_fenced_bash(text: str, allowed: list[str], call_id: str = "") -> Action:
    """Parse a ``fenced_bash``-format reply (see the module docstring).

    Args:
        text: the reply's content.
        allowed: tool names the contract allows (``bash``, maybe ``finish``).
        call_id: id to give the action.

    Raises:
        ActionParseError: no shell block (and the reply is not ``done``), or an empty block.
    """
    block = first_shell_block(text)
    if block is None:
        if text.strip().lower().rstrip(".") in FINISH_REPLIES and "finish" in allowed:
            return Action(tool="finish", arguments={}, call_id=call_id)
        raise ActionParseError("no ```bash block found; reply with one command in a ```bash fenced block")
    command = block.strip()
    if not command:
        raise ActionParseError("the ```bash block is empty; put one command in it")
    return _shell_action(command, allowed, call_id)


def parse_command(text: str, allowed: list[str], call_id: str = "") -> Action:
    """Parse a ``command``-format reply: its first non-empty line is the command.

    Args:
        text: the reply's content.
        allowed: tool names the contract allows (``bash``, maybe ``finish``).
        call_id: id to give the action.

    Raises:
        ActionParseError: no line holds a command.
    """
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("```"):
            break
    else:
        raise ActionParseError("no command found; reply with one shell command line")
    if line.startswith("$ ") or line == "$":
        line = line[1:].strip()
    if len(line) >= 2 and line[0] == "`" and line[-1] == "`":
        line = line.strip("`").strip()
    if not line:
        raise ActionParseError("no command found; reply with one shell command line")
    return _shell_action(line, allowed, call_id)


def parse_reply(action_format: str, content: str, tool_calls: list[Any], allowed: list[str], call_id: str) -> Action:
    """Turn a reply into an action under ``action_format`` (one of the four formats).

    Args:
        action_format: the contract's ``tools.action_format``.
        content: the reply's text.
        tool_calls: the reply's native tool calls (``tool_calls`` format only).
        allowed: tool names the contract allows.
        call_id: the id of a text-format action (native calls carry their own).

    Raises:
        ActionParseError: the reply is not a valid action in that format.
        ValueError: an unknown action format (the contract model prevents it).
    """
    if action_format == "tool_calls":
        return parse_tool_call(tool_calls, allowed)
    if action_format == "json":
        return parse_json_action(content, allowed, call_id=call_id)
    if action_format == "fenced_bash":
        return parse_fenced_bash(content, allowed, call_id=call_id)
    if action_format == "command":
        return parse_command(content, allowed, call_id=call_id)
    raise ValueError(f"unknown action format {action_format!r}")


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
    fn = _part(call, "function")
    if fn is None:
        raise ActionParseError("the tool call names no function; call one of the tools")
    name, raw, call_id = _part(fn, "name"), _part(fn, "arguments"), _part(call, "id")
    try:
        args = json.loads(raw) if isinstance(raw, str) and raw.strip() else (raw or {})
    except (ValueError, RecursionError) as exc:
        raise ActionParseError(f"arguments of {str(name)[:80]} are not valid JSON: {str(exc)[:200]}") from None
    return _check(name, args, allowed, call_id if isinstance(call_id, str) else "")


def _part(obj: Any, name: str) -> Any:
    """``obj[name]`` of a dict, ``obj.name`` of an SDK object; None when it has no such part."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)
