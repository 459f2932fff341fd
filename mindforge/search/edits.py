"""Recorded operator edits of an HCP contract: the search space of configuration search.

An :class:`Edit` is data (an operation and a value), so a candidate contract is fully
described by its search root plus a short list of edits, and the search state stays
small. :func:`operator_edits` lists the single edits that apply to a contract; each turns
into dotted-path changes for :func:`mindforge.hcp.derive` (:func:`edit_changes`).

Task time limits and resources (agent/verifier/build timeouts, CPUs, memory, storage)
are never edited: they belong to the task (shared HCP.md), ``derive`` refuses them, and
no operation here produces them.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from mindforge.hcp import KNOWN_TOOLS, HCPContract, make_embedded

EditOp = Literal[
    "add_tool",
    "remove_tool",
    "hook_on",
    "hook_off",
    "on_command_error",
    "add_skill",
    "max_observation_bytes",
    "bash_timeout_sec",
    "max_turns",
    "max_tokens",
    "temperature",
    "top_p",
    "action_format",
    "append_prompt",
]

#: boolean hooks an edit may toggle
BOOL_HOOKS: tuple[str, ...] = ("plan_first", "verify_before_finish")
#: tools never removed (without them the agent cannot act or stop)
KEEP_TOOLS = frozenset({"bash", "finish"})
#: where library skills land in the workspace
SKILL_DIR = "skills"
#: bounds of the numeric operator edits
OBSERVATION_BYTES_RANGE = (1024, 1 << 20)
BASH_TIMEOUT_SEC_RANGE = (5.0, 600.0)
MAX_TURNS_RANGE = (5, 200)
TEMPERATURES = (0.0, 0.3, 1.0)
TOP_PS = (0.8, 1.0)
#: longest model-proposed prompt text accepted, in characters
MAX_PROMPT_CHARS = 2000


class Edit(BaseModel):
    """One recorded edit.

    Attributes:
        op: the operation.
        value: its argument: a tool, hook, skill or format name, a number, or (for
            ``append_prompt``) the text to append to ``resources.append_system_prompt``.
    """

    model_config = ConfigDict(frozen=True)

    op: EditOp
    value: str | bool | int | float

    @property
    def key(self) -> str:
        """Stable identity, e.g. ``add_tool=read_file`` (prompt text by its sha256 prefix)."""
        if self.op == "append_prompt":
            return f"append_prompt={hashlib.sha256(str(self.value).encode()).hexdigest()[:12]}"
        return f"{self.op}={self.value}"

    @property
    def slot(self) -> str:
        """What the edit sets; two edits with one slot conflict and are never composed."""
        if self.op in ("add_tool", "remove_tool"):
            return f"tool:{self.value}"
        if self.op in ("hook_on", "hook_off"):
            return f"hook:{self.value}"
        if self.op == "add_skill":
            return f"skill:{self.value}"
        return self.op

    def tags(self, parent: HCPContract | None = None) -> frozenset[str]:
        """Words the audit affinity table matches (``tool:read_file``, ``observation_raise``, ...)."""
        op, value = self.op, self.value
        if op == "add_tool":
            return frozenset({"tools", f"tool:{value}"})
        if op == "remove_tool":
            return frozenset({"tools_fewer"})
        if op == "hook_on":
            return frozenset({"hooks", "plan" if value == "plan_first" else "verify"})
        if op == "hook_off":
            return frozenset({"hooks_off"})
        if op == "on_command_error":
            return frozenset({"error_output"} if value == "full" else {"error_output_less"})
        if op == "add_skill":
            return frozenset({"skills", f"skill:{value}"})
        if op == "append_prompt":
            return frozenset({"prompt"})
        if op in ("temperature", "top_p"):
            return frozenset({"sampling"})
        if op == "action_format":
            return frozenset({"format"})
        names = {
            "max_observation_bytes": "observation",
            "bash_timeout_sec": "time",
            "max_turns": "turns",
            "max_tokens": "reply_tokens",
        }
        current = _current(parent, op) if parent is not None else None
        direction = "raise" if current is None or float(value) > float(current) else "lower"
        return frozenset({f"{names[op]}_{direction}"})

    def describe(self, parent: HCPContract) -> str:
        """The edit in words, as recorded in the child's ``mindforge.edit``."""
        op, value = self.op, self.value
        if op == "add_tool":
            return f"tools: allow {value}"
        if op == "remove_tool":
            return f"tools: remove {value}"
        if op in ("hook_on", "hook_off"):
            return f"hooks: {value} {'on' if op == 'hook_on' else 'off'}"
        if op == "add_skill":
            return f"skills: add {SKILL_DIR}/{value}"
        if op == "append_prompt":
            return f"prompt: append model-proposed text ({self.key.split('=')[1]}): {str(value)[:80]}"
        return f"{_PATHS[op]}: {_current(parent, op)!r} -> {value!r}"


_PATHS = {
    "on_command_error": "hooks.on_command_error",
    "max_observation_bytes": "tools.max_observation_bytes",
    "bash_timeout_sec": "tools.bash_timeout_sec",
    "max_turns": "workspace.max_turns",
    "max_tokens": "model.max_tokens",
    "temperature": "provider_options.temperature",
    "top_p": "provider_options.top_p",
    "action_format": "tools.action_format",
}


def _current(contract: HCPContract, op: str) -> Any:
    section, name = _PATHS[op].split(".")
    return getattr(getattr(contract, section), name)


@lru_cache(maxsize=1)
def skill_library() -> dict[str, str]:
    """The skills shipped with MindForge (``mindforge/search/skills/*.sh``): file name -> script text."""
    folder = resources.files("mindforge.search") / "skills"
    return {
        entry.name: entry.read_text(encoding="utf-8")
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".sh")
    }


def edit_changes(parent: HCPContract, edit: Edit) -> dict[str, Any]:
    """Dotted-path changes for :func:`mindforge.hcp.derive` that apply ``edit`` to ``parent``.

    Raises:
        ValueError: the edit does not apply (unknown skill, tool not in the HCP tool set)
            or changes nothing.
    """
    op, value = edit.op, edit.value
    allow = list(parent.tools.allow)
    if op == "add_tool":
        if value not in KNOWN_TOOLS or value in allow:
            raise ValueError(f"cannot add tool {value!r} (allowed: {allow})")
        return {"tools.allow": [*allow, value]}
    if op == "remove_tool":
        if value not in allow or value in KEEP_TOOLS:
            raise ValueError(f"cannot remove tool {value!r} (allowed: {allow})")
        return {"tools.allow": [tool for tool in allow if tool != value]}
    if op in ("hook_on", "hook_off"):
        if value not in BOOL_HOOKS or getattr(parent.hooks, str(value)) == (op == "hook_on"):
            raise ValueError(f"{op} {value!r} changes nothing")
        return {f"hooks.{value}": op == "hook_on"}
    if op == "add_skill":
        return _skill_changes(parent, str(value))
    if op == "append_prompt":
        text = str(value).strip()
        if not text or len(text) > MAX_PROMPT_CHARS or text in parent.resources.append_system_prompt:
            raise ValueError("the prompt text is empty, too long, or already in append_system_prompt")
        joined = "\n\n".join(part for part in (parent.resources.append_system_prompt.strip(), text) if part)
        return {"resources.append_system_prompt": joined}
    if _current(parent, op) == value and type(_current(parent, op)) is type(value):
        raise ValueError(f"{_PATHS[op]} is already {value!r}")
    return {_PATHS[op]: value}


def _skill_changes(parent: HCPContract, name: str) -> dict[str, Any]:
    library = skill_library()
    if name not in library:
        raise ValueError(f"no skill {name!r} in the library ({', '.join(library)})")
    path = f"{SKILL_DIR}/{name}"
    if path in parent.skills.paths or parent.resources.resource(path) is not None:
        raise ValueError(f"skill {path} is already in the contract")
    embedded = [*parent.resources.embedded, make_embedded("skill", path, library[name])]
    return {"resources.embedded": embedded, "skills.paths": [*parent.skills.paths, path]}


def _scaled(current: float, factor: float, bounds: tuple[float, float], integer: bool) -> float | int | None:
    value = min(max(current * factor, bounds[0]), bounds[1])
    value = int(round(value)) if integer else float(value)
    return None if value == current else value


def operator_edits(contract: HCPContract) -> list[Edit]:
    """Every single operator edit that applies to ``contract``, in a fixed order.

    Tools added or removed, boolean hooks toggled, the other ``on_command_error``
    variants, library skills added, the observation cap x4 and /4, the bash timeout x2
    and /2, max turns x2 and /2, max tokens per call x2 (below the context window),
    other temperatures and top_p values, and the other action format. Prompt edits are
    model-proposed (:mod:`mindforge.search.proposals`), not listed here.
    """
    tools, hooks = contract.tools, contract.hooks
    out: list[Edit] = [Edit(op="add_tool", value=t) for t in KNOWN_TOOLS if t not in tools.allow]
    out += [Edit(op="remove_tool", value=t) for t in tools.allow if t not in KEEP_TOOLS]
    out += [Edit(op="hook_off" if getattr(hooks, h) else "hook_on", value=h) for h in BOOL_HOOKS]
    out += [Edit(op="on_command_error", value=v) for v in ("full", "tail", "none") if v != hooks.on_command_error]
    out += [
        Edit(op="add_skill", value=name)
        for name in skill_library()
        if f"{SKILL_DIR}/{name}" not in contract.skills.paths
    ]
    numeric = [
        ("max_observation_bytes", tools.max_observation_bytes, (4.0, 0.25), OBSERVATION_BYTES_RANGE, True),
        ("bash_timeout_sec", tools.bash_timeout_sec, (2.0, 0.5), BASH_TIMEOUT_SEC_RANGE, False),
        ("max_turns", contract.workspace.max_turns, (2.0, 0.5), MAX_TURNS_RANGE, True),
    ]
    for op, current, factors, bounds, integer in numeric:
        for factor in factors:
            if (value := _scaled(current, factor, bounds, integer)) is not None:
                out.append(Edit(op=op, value=value))
    if contract.model.max_tokens * 2 < contract.model.context_window:
        out.append(Edit(op="max_tokens", value=contract.model.max_tokens * 2))
    opts = contract.provider_options
    out += [Edit(op="temperature", value=t) for t in TEMPERATURES if t != opts.temperature]
    out += [Edit(op="top_p", value=p) for p in TOP_PS if p != opts.top_p]
    out.append(Edit(op="action_format", value="tool_calls" if tools.action_format == "json" else "json"))
    return out
