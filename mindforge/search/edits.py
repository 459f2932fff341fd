"""Recorded operator edits of an HCP contract: the search space of configuration search.

An :class:`Edit` is data (an operation and a value), so a candidate contract is fully
described by its search root plus a short list of edits, and the search state stays
small. :func:`operator_edits` lists the single edits that apply to a contract; each turns
into dotted-path changes for :func:`mindforge.hcp.derive` (:func:`edit_changes`).

Every harness feature is reachable from the plain baseline by one edit or a chain of
them: tools, hooks, skills from the shipped library (:mod:`mindforge.search.library`),
worked examples the lineage was seeded with (``--examples DIR``; none by default: an
example written from bundled tasks would carry test answers), the action format (all four),
constrained decoding of ``json`` replies (a grammar of the allowed actions), stop
sequences (named presets), the reply length (``model.max_tokens`` up and down),
sampling, the observation cap, truncation and what an observation shows (exit code, turn budget),
the turn limit and the mode (``multi_turn`` / ``single_command``).

Task time limits and resources (agent/verifier/build timeouts, CPUs, memory, storage)
are never edited: they belong to the task (docs/design.md), ``derive`` refuses them, and
no operation here produces them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from mindforge.errors import InputError
from mindforge.experience.contract import experience_changes
from mindforge.experience.snapshot import load_snapshot
from mindforge.hcp import (
    ACTION_FORMATS,
    KNOWN_TOOLS,
    SHELL_FORMATS,
    HCPContract,
    WorkedExample,
    make_embedded,
)
from mindforge.hcp.examples import MAX_EXAMPLES
from mindforge.hcp.sections import EXPERIENCE_KS, SHELL_FORMAT_TOOLS
from mindforge.search.library import skill_library

__all__ = [
    "Edit",
    "EditOp",
    "edit_changes",
    "edit_example",
    "example_edit",
    "operator_edits",
    "skill_library",
    "snapshot_edit",
]

EditOp = Literal[
    "add_tool",
    "remove_tool",
    "hook_on",
    "hook_off",
    "on_command_error",
    "add_skill",
    "add_example",
    "max_observation_bytes",
    "observation_truncation",
    "show_exit_code",
    "show_turn_budget",
    "bash_timeout_sec",
    "max_turns",
    "mode",
    "max_tokens",
    "stop",
    "temperature",
    "top_p",
    "action_format",
    "constrained_decoding",
    "append_prompt",
    "experience_k",
    "experience_snapshot",
    "example_style",
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
#: the fewest completion tokens per call an edit may set (a shell command line fits)
MIN_MAX_TOKENS = 32
#: ``model.max_tokens`` is offered x2 (below the context window) and x these factors
#: (at least :data:`MIN_MAX_TOKENS`): small models ramble, shorter replies help them
MAX_TOKENS_DOWN = (0.5, 0.25)
TEMPERATURES = (0.0, 0.3, 1.0)
TOP_PS = (0.8, 1.0)
#: named stop-sequence presets (op ``stop``): ``newline`` ends a ``command``-format reply
#: after its one line; ``blank_line`` after a paragraph; ``none`` sends none
STOP_PRESETS: dict[str, list[str]] = {"newline": ["\n"], "blank_line": ["\n\n"], "none": []}
#: the other values of the observation display ops
TRUNCATIONS = ("head_tail", "head", "tail")
MODES = ("multi_turn", "single_command")
#: longest model-proposed prompt text accepted, in characters
MAX_PROMPT_CHARS = 2000

_PATHS = {
    "on_command_error": "hooks.on_command_error",
    "max_observation_bytes": "tools.max_observation_bytes",
    "observation_truncation": "tools.observation_truncation",
    "show_exit_code": "tools.show_exit_code",
    "show_turn_budget": "tools.show_turn_budget",
    "bash_timeout_sec": "tools.bash_timeout_sec",
    "max_turns": "workspace.max_turns",
    "mode": "workspace.mode",
    "max_tokens": "model.max_tokens",
    "stop": "provider_options.stop",
    "temperature": "provider_options.temperature",
    "top_p": "provider_options.top_p",
    "action_format": "tools.action_format",
    "constrained_decoding": "tools.constrained_decoding",
    "example_style": "resources.example_style",
}
#: numeric op -> tag stem (the tag is ``<stem>_raise`` or ``<stem>_lower``)
_DIRECTIONAL = {
    "max_observation_bytes": "observation",
    "bash_timeout_sec": "time",
    "max_turns": "turns",
    "max_tokens": "reply_tokens",
}
#: ops whose tags do not depend on the value
_FIXED_TAGS = {
    "remove_tool": {"tools_fewer"},
    "hook_off": {"hooks_off"},
    "append_prompt": {"prompt"},
    "temperature": {"sampling"},
    "top_p": {"sampling"},
    "action_format": {"format"},
    "observation_truncation": {"truncation"},
    "experience_k": {"examples", "experience"},
    "experience_snapshot": {"examples", "experience"},
    "example_style": {"examples"},
}


class Edit(BaseModel):
    """One recorded edit.

    Attributes:
        op: the operation.
        value: its argument: a tool, hook, skill, format, mode, truncation or
            stop-preset name, a number, a boolean (``show_exit_code``,
            ``show_turn_budget``), for ``append_prompt`` the text to append to
            ``resources.append_system_prompt``, and for ``add_example`` the worked
            example itself as JSON (:func:`example_edit`), so a candidate is described
            by its edits alone, wherever it is materialised.
    """

    model_config = ConfigDict(frozen=True)

    op: EditOp
    value: str | bool | int | float

    @property
    def key(self) -> str:
        """Stable identity, e.g. ``add_tool=read_file`` (prompt text by its sha256 prefix)."""
        if self.op == "append_prompt":
            return f"append_prompt={hashlib.sha256(str(self.value).encode()).hexdigest()[:12]}"
        if self.op == "add_example":
            return f"add_example={self.example_name}"
        if self.op == "experience_snapshot":
            return f"experience_snapshot={hashlib.sha256(str(self.value).encode()).hexdigest()[:12]}"
        return f"{self.op}={self.value}"

    @property
    def example_name(self) -> str:
        """The worked example's name (op ``add_example``; ``""`` for other ops or an unreadable value)."""
        if self.op != "add_example":
            return ""
        try:
            return str(json.loads(str(self.value)).get("name", ""))
        except (ValueError, AttributeError):
            return ""

    @property
    def slot(self) -> str:
        """What the edit sets; two edits with one slot conflict and are never composed."""
        if self.op in ("add_tool", "remove_tool"):
            return f"tool:{self.value}"
        if self.op in ("hook_on", "hook_off"):
            return f"hook:{self.value}"
        if self.op == "add_skill":
            return f"skill:{self.value}"
        if self.op == "add_example":
            return f"example:{self.example_name}"
        return self.op

    def tags(self, parent: HCPContract | None = None) -> frozenset[str]:
        """Words the audit affinity table matches (``tool:read_file``, ``observation_raise``, ...).

        The switch to the ``command`` format is also tagged with what it couples on
        ``parent`` (a newline stop, ``single_command``), so the audit rules those fix see it.
        """
        op, value = self.op, self.value
        if op == "action_format" and value == "command" and parent is not None:
            # the switch also sets what it couples (see _format_changes): tag those too
            try:
                changes = _format_changes(parent, value)
            except ValueError:
                changes = {}
            tags = set(_FIXED_TAGS[op])
            if "provider_options.stop" in changes:
                tags |= Edit(op="stop", value="newline").tags(parent)
            if "workspace.mode" in changes:
                tags |= Edit(op="mode", value=changes["workspace.mode"]).tags(parent)
            return frozenset(tags)
        if op in _FIXED_TAGS:
            return frozenset(_FIXED_TAGS[op])
        if op == "add_tool":
            return frozenset({"tools", f"tool:{value}"})
        if op == "hook_on":
            return frozenset({"hooks", "plan" if value == "plan_first" else "verify"})
        if op == "on_command_error":
            return frozenset({"error_output"} if value == "full" else {"error_output_less"})
        if op == "add_skill":
            return frozenset({"skills", f"skill:{value}"})
        if op == "add_example":
            return frozenset({"examples", f"example:{self.example_name}"})
        if op == "stop":
            return frozenset({"stop_off"} if value == "none" else {"stop", f"stop:{value}"})
        if op == "show_exit_code":
            return frozenset({"exit_code"} if value else {"observation_terse"})
        if op == "show_turn_budget":
            return frozenset({"budget"} if value else {"observation_terse"})
        if op == "constrained_decoding":
            return frozenset({"format", "constrained"} if value else {"constrained_off"})
        if op == "mode":
            return frozenset({str(value)})
        current = _current(parent, op) if parent is not None else None
        direction = "raise" if current is None or float(value) > float(current) else "lower"
        return frozenset({f"{_DIRECTIONAL[op]}_{direction}"})

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
        if op == "add_example":
            return f"resources.examples: add worked example {self.example_name!r} the lineage was seeded with"
        if op == "experience_k":
            current = parent.resources.experience.k if parent.resources.experience else None
            return f"resources.experience.k: {current!r} -> {value!r} (experience entries shown per task)"
        if op == "experience_snapshot":
            return f"resources.experience: move to the latest validated snapshot ({self.key.split('=')[1]})"
        if op == "append_prompt":
            return f"prompt: append model-proposed text ({self.key.split('=')[1]}): {str(value)[:80]}"
        if op == "stop":
            return f"{_PATHS[op]}: {_current(parent, op)!r} -> {STOP_PRESETS.get(str(value))!r} ({value})"
        text = f"{_PATHS[op]}: {_current(parent, op)!r} -> {value!r}"
        if op == "action_format" and value in SHELL_FORMATS:
            dropped = [t for t in parent.tools.allow if t not in SHELL_FORMAT_TOOLS]
            if dropped:
                text += f" (a shell format offers bash and finish only: tools.allow drops {', '.join(dropped)})"
        if op == "action_format" and value == "command":
            text += "; one command per trial (workspace.mode single_command), replies stop at their newline"
        if op == "constrained_decoding" and value:
            text += " (each reply sampled under the JSON schema of the allowed actions)"
        return text


def _current(contract: HCPContract, op: str) -> Any:
    section, name = _PATHS[op].split(".")
    return getattr(getattr(contract, section), name)


def edit_changes(parent: HCPContract, edit: Edit) -> dict[str, Any]:
    """Dotted-path changes for :func:`mindforge.hcp.derive` that apply ``edit`` to ``parent``.

    Raises:
        ValueError: the edit does not apply (unknown skill, example, preset or format, a
            tool the format cannot offer) or changes nothing.
    """
    op, value = edit.op, edit.value
    allow = list(parent.tools.allow)
    if op == "add_tool":
        if value not in KNOWN_TOOLS or value in allow:
            raise ValueError(f"cannot add tool {value!r} (allowed: {allow})")
        if parent.tools.action_format in SHELL_FORMATS and value not in SHELL_FORMAT_TOOLS:
            raise ValueError(f"the {parent.tools.action_format} action format cannot offer {value!r}")
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
    if op == "add_example":
        return _example_changes(parent, edit)
    if op == "append_prompt":
        text = str(value).strip()
        if not text or len(text) > MAX_PROMPT_CHARS or text in parent.resources.append_system_prompt:
            raise ValueError("the prompt text is empty, too long, or already in append_system_prompt")
        joined = "\n\n".join(part for part in (parent.resources.append_system_prompt.strip(), text) if part)
        return {"resources.append_system_prompt": joined}
    if op == "stop":
        if value not in STOP_PRESETS:
            raise ValueError(f"no stop preset {value!r} ({', '.join(STOP_PRESETS)})")
        if list(parent.provider_options.stop) == STOP_PRESETS[str(value)]:
            raise ValueError(f"provider_options.stop is already the {value!r} preset")
        return {"provider_options.stop": list(STOP_PRESETS[str(value)])}
    if op == "action_format":
        return _format_changes(parent, value)
    if op in ("experience_k", "experience_snapshot"):
        return _experience_edit_changes(parent, edit)
    if op == "example_style" and not (parent.resources.examples or parent.resources.experience):
        raise ValueError("resources.example_style changes nothing: the contract shows no worked examples")
    if op == "constrained_decoding" and parent.tools.action_format != "json":
        raise ValueError(f"constrained decoding needs the json action format, not {parent.tools.action_format!r}")
    if _current(parent, op) == value and type(_current(parent, op)) is type(value):
        raise ValueError(f"{_PATHS[op]} is already {value!r}")
    return {_PATHS[op]: value}


def _format_changes(parent: HCPContract, value: Any) -> dict[str, Any]:
    """The switch to another action format; ``command`` comes as completion-style command-line prompting.

    A ``command`` reply is one shell command line, so the switch also stops the reply at
    its newline (when no stop strings are set) and gives the model one command per trial
    (``single_command``: it runs, then the verifier): a small model in a multi-turn
    command loop repeats itself until the turn limit instead of saying ``done``. Both
    stay editable on their own afterwards (ops ``stop`` and ``mode``).
    """
    if value not in ACTION_FORMATS or value == parent.tools.action_format:
        raise ValueError(f"cannot switch the action format to {value!r} (now {parent.tools.action_format!r})")
    changes: dict[str, Any] = {"tools.action_format": value}
    if parent.tools.constrained_decoding:
        changes["tools.constrained_decoding"] = False  # only the json format has an action schema
    if value == "command":
        if not parent.provider_options.stop:
            changes["provider_options.stop"] = STOP_PRESETS["newline"]
        if parent.workspace.mode != "single_command":
            changes["workspace.mode"] = "single_command"
    if value in SHELL_FORMATS:
        allow = list(parent.tools.allow)
        if "bash" not in allow:
            raise ValueError(f"the {value} action format needs bash, which the contract does not allow")
        kept = [tool for tool in allow if tool in SHELL_FORMAT_TOOLS]
        if kept != allow:
            changes["tools.allow"] = kept
    return changes


def _skill_changes(parent: HCPContract, name: str) -> dict[str, Any]:
    library = skill_library()
    if name not in library:
        raise ValueError(f"no skill {name!r} in the library ({', '.join(library)})")
    path = f"{SKILL_DIR}/{name}"
    if path in parent.skills.paths or parent.resources.resource(path) is not None:
        raise ValueError(f"skill {path} is already in the contract")
    embedded = [*parent.resources.embedded, make_embedded("skill", path, library[name])]
    return {"resources.embedded": embedded, "skills.paths": [*parent.skills.paths, path]}


def example_edit(example: WorkedExample) -> Edit:
    """The ``add_example`` edit that adds ``example`` (carried as canonical JSON in the edit's value)."""
    return Edit(op="add_example", value=json.dumps(example.model_dump(mode="json"), sort_keys=True))


def edit_example(edit: Edit) -> WorkedExample:
    """The worked example an ``add_example`` edit carries.

    Raises:
        ValueError: the edit is another op, or its value is not a worked example as JSON
            (e.g. a bare library name from before examples left the default search space).
    """
    if edit.op != "add_example":
        raise ValueError(f"{edit.op} is not add_example")
    try:
        return WorkedExample.model_validate_json(str(edit.value))
    except ValueError:
        raise ValueError(f"add_example carries no worked example as JSON: {str(edit.value)[:60]!r}") from None


def _example_changes(parent: HCPContract, edit: Edit) -> dict[str, Any]:
    example = edit_example(edit)
    if not example.name:
        raise ValueError("a worked example added by search needs a name")
    if parent.resources.example(example.name) is not None:
        raise ValueError(f"worked example {example.name!r} is already in the contract")
    if len(parent.resources.examples) >= MAX_EXAMPLES:
        raise ValueError(f"the contract already carries {MAX_EXAMPLES} worked examples")
    return {"resources.examples": [*parent.resources.examples, example]}


def snapshot_edit(snapshot_json: str) -> Edit:
    """The ``experience_snapshot`` edit that moves a contract to this snapshot (its canonical JSON)."""
    return Edit(op="experience_snapshot", value=snapshot_json)


def _experience_edit_changes(parent: HCPContract, edit: Edit) -> dict[str, Any]:
    settings = parent.resources.experience
    if edit.op == "experience_k":
        if settings is None:
            raise ValueError("the contract carries no experience snapshot to retrieve from")
        if edit.value not in EXPERIENCE_KS or edit.value == settings.k or isinstance(edit.value, bool):
            raise ValueError(f"experience k {edit.value!r} is not another of {list(EXPERIENCE_KS)}")
        return {"resources.experience.k": int(edit.value)}
    try:
        snapshot = load_snapshot(str(edit.value), "experience_snapshot edit")
    except InputError as exc:
        raise ValueError(str(exc)) from None
    if settings is not None and settings.snapshot == snapshot.snapshot_id:
        raise ValueError(f"the contract already carries snapshot {snapshot.snapshot_id[:12]}")
    return experience_changes(parent, snapshot)


def _scaled(current: float, factor: float, bounds: tuple[float, float], integer: bool) -> float | int | None:
    value = min(max(current * factor, bounds[0]), bounds[1])
    value = int(round(value)) if integer else float(value)
    return None if value == current else value


def _experience_edits(contract: HCPContract, snapshot_json: str | None) -> list[Edit]:
    settings = contract.resources.experience
    out = [Edit(op="experience_k", value=k) for k in EXPERIENCE_KS if settings is not None and k != settings.k]
    if snapshot_json is not None:
        edit = snapshot_edit(snapshot_json)
        try:
            _experience_edit_changes(contract, edit)
        except ValueError:
            return out  # already carries it
        out.append(edit)
    return out


def operator_edits(
    contract: HCPContract, examples: Sequence[WorkedExample] = (), snapshot_json: str | None = None
) -> list[Edit]:
    """Every single operator edit that applies to ``contract``, in a fixed order.

    Args:
        contract: the contract the edits apply to.
        examples: worked examples the search may add (a lineage's ``--examples``
            folder); none by default.
        snapshot_json: the lineage's latest validated experience snapshot (canonical
            JSON, ``ExperienceSnapshot.to_json``); when the contract does not carry it yet,
            an ``experience_snapshot`` edit moves it there. With a snapshot in the
            contract, ``experience_k`` edits set the other retrieval sizes of 0, 1, 2, 4, 8.

    Tools added (those the action format can offer) or removed, boolean hooks toggled,
    the other ``on_command_error`` variants, library skills and the given worked examples added,
    the observation cap x4 and /4, the other truncations, the exit-code and turn-budget
    lines toggled, the bash timeout x2 and /2, max turns x2 and /2, the other mode, max
    tokens per call x2 (below the context window), /2 and /4 (at least 32), the stop
    presets other than the current one, other temperatures and top_p values, constrained
    decoding toggled (``json`` format only), the worked examples' other style (``turns`` or
    ``compact``, when the contract shows examples or a snapshot may add them), and every
    other action format. Prompt edits
    are model-proposed (:mod:`mindforge.search.proposals`), not listed here.
    """
    tools, hooks = contract.tools, contract.hooks
    offerable = SHELL_FORMAT_TOOLS if tools.action_format in SHELL_FORMATS else frozenset(KNOWN_TOOLS)
    out: list[Edit] = [Edit(op="add_tool", value=t) for t in KNOWN_TOOLS if t not in tools.allow and t in offerable]
    out += [Edit(op="remove_tool", value=t) for t in tools.allow if t not in KEEP_TOOLS]
    out += [Edit(op="hook_off" if getattr(hooks, h) else "hook_on", value=h) for h in BOOL_HOOKS]
    out += [Edit(op="on_command_error", value=v) for v in ("full", "tail", "none") if v != hooks.on_command_error]
    out += [
        Edit(op="add_skill", value=name)
        for name in skill_library()
        if f"{SKILL_DIR}/{name}" not in contract.skills.paths
    ]
    if len(contract.resources.examples) < MAX_EXAMPLES:
        out += [example_edit(e) for e in examples if contract.resources.example(e.name) is None]
    out += _experience_edits(contract, snapshot_json)
    numeric = [
        ("max_observation_bytes", tools.max_observation_bytes, (4.0, 0.25), OBSERVATION_BYTES_RANGE, True),
        ("bash_timeout_sec", tools.bash_timeout_sec, (2.0, 0.5), BASH_TIMEOUT_SEC_RANGE, False),
        ("max_turns", contract.workspace.max_turns, (2.0, 0.5), MAX_TURNS_RANGE, True),
    ]
    for op, current, factors, bounds, integer in numeric:
        for factor in factors:
            if (value := _scaled(current, factor, bounds, integer)) is not None:
                out.append(Edit(op=op, value=value))
    tokens = contract.model.max_tokens
    if tokens * 2 < contract.model.context_window:
        out.append(Edit(op="max_tokens", value=tokens * 2))
    lower = sorted({max(int(tokens * f), MIN_MAX_TOKENS) for f in MAX_TOKENS_DOWN} - {tokens}, reverse=True)
    out += [Edit(op="max_tokens", value=value) for value in lower if value < tokens]
    out += [Edit(op="observation_truncation", value=v) for v in TRUNCATIONS if v != tools.observation_truncation]
    out.append(Edit(op="show_exit_code", value=not tools.show_exit_code))
    out.append(Edit(op="show_turn_budget", value=not tools.show_turn_budget))
    out += [Edit(op="mode", value=m) for m in MODES if m != contract.workspace.mode]
    opts = contract.provider_options
    out += [Edit(op="stop", value=name) for name, stops in STOP_PRESETS.items() if stops != list(opts.stop)]
    out += [Edit(op="temperature", value=t) for t in TEMPERATURES if t != opts.temperature]
    out += [Edit(op="top_p", value=p) for p in TOP_PS if p != opts.top_p]
    if tools.action_format == "json":
        out.append(Edit(op="constrained_decoding", value=not tools.constrained_decoding))
    if contract.resources.examples or contract.resources.experience or snapshot_json is not None:
        style = contract.resources.example_style
        out.append(Edit(op="example_style", value="compact" if style == "turns" else "turns"))
    can_shell = "bash" in tools.allow
    out += [
        Edit(op="action_format", value=f)
        for f in ACTION_FORMATS
        if f != tools.action_format and (f not in SHELL_FORMATS or can_shell)
    ]
    return out
