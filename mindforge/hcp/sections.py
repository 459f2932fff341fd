"""Section models of an HCP contract (see :mod:`mindforge.hcp.model` for the whole contract).

Each section keeps keys it does not know (``extra="allow"``) so that rewriting a file
loses nothing, and validates known keys strictly (no string-to-number coercion).
"""

from __future__ import annotations

import re
import string
from pathlib import PurePosixPath
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.json_schema import JsonDict

from mindforge.hcp.defaults import DEFAULT_DISCOVERY_PROMPT, DEFAULT_SYSTEM_PROMPT
from mindforge.hcp.embedded import EmbeddedResource, check_relative_path
from mindforge.hcp.examples import MAX_EXAMPLES, WorkedExample

ToolName = Literal["bash", "read_file", "write_file", "finish"]
ActionFormat = Literal["json", "tool_calls", "fenced_bash", "command"]
Truncation = Literal["head_tail", "head", "tail"]
AgentMode = Literal["multi_turn", "single_command"]

#: the tools a MindForge harness can offer (``tools.allow`` is a subset)
KNOWN_TOOLS: tuple[ToolName, ...] = get_args(ToolName)
#: every ``tools.action_format``
ACTION_FORMATS: tuple[str, ...] = get_args(ActionFormat)
#: action formats whose reply is a shell command (no tool names): they offer bash and finish only
SHELL_FORMATS: frozenset[str] = frozenset({"fenced_bash", "command"})
#: the tools a shell format can offer (``finish`` by the reply ``done``)
SHELL_FORMAT_TOOLS: frozenset[str] = frozenset({"bash", "finish"})
#: ``provider_options.stop`` holds at most this many strings (the OpenAI API's limit)
MAX_STOP_SEQUENCES = 4

#: marks a field added after the shipped 1.0.0 contracts: it is left out of the resolved
#: document while it holds its default (see :meth:`mindforge.hcp.model.HCPContract.to_document`)
OMIT_AT_DEFAULT: JsonDict = {"hcp_omit_at_default": True}

_NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")
_REVISION_RE = re.compile(r"[0-9A-Za-z][0-9A-Za-z._+-]*")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_env_name(value: str) -> str:
    if not _ENV_NAME_RE.fullmatch(value):
        raise ValueError(
            f"{value!r} is not an environment variable name; put the NAME of a variable here "
            "(for example 'OPENAI_API_KEY') and keep the value in the environment"
        )
    return value


class _Section(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, strict=True)


class MindForgeSection(_Section):
    """``[mindforge]``: identity and lineage (MindForge's extension; other harnesses ignore it).

    Attributes:
        name: lowercase slug (``[a-z0-9][a-z0-9._-]*``); shipped files are named after it.
        revision: immutable once registered (``1.0.0``); no ``/`` or ``@``.
        parent: ``"name@revision"`` this contract was derived from, ``""`` for a root.
        edit: the recorded edit that produced it from the parent (required with a parent).
        description: free text.
    """

    name: str
    revision: str
    parent: str = ""
    edit: str = ""
    description: str = ""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME_RE.fullmatch(value):
            raise ValueError(f"{value!r} is not a contract name (lowercase letters, digits, '.', '_', '-')")
        return value

    @field_validator("revision")
    @classmethod
    def _revision(cls, value: str) -> str:
        if not _REVISION_RE.fullmatch(value):
            raise ValueError(f"{value!r} is not a revision (letters, digits, '.', '_', '+', '-'; e.g. '1.0.0')")
        return value

    @field_validator("parent")
    @classmethod
    def _parent(cls, value: str) -> str:
        if value:
            name, sep, revision = value.partition("@")
            if not sep or not _NAME_RE.fullmatch(name) or not _REVISION_RE.fullmatch(revision):
                raise ValueError(f"{value!r} is not 'name@revision' (or '' for a root contract)")
        return value


class ModelSection(_Section):
    """``[model]``: the endpoint, base model and adapter the harness talks to.

    Attributes:
        provider: API flavour; ``openai-compatible``.
        id: base model id served by the endpoint.
        adapter: adapter name served by the endpoint; ``""`` = base weights.
        base_url_env: NAME of the env var holding the endpoint's base URL.
        api_key_env: NAME of the env var holding the API key; ``""`` = no key needed.
        context_window: the model's context length, in tokens.
        max_tokens: completion tokens per model call (below ``context_window``).
    """

    provider: str = Field(default="openai-compatible", min_length=1)
    id: str = Field(min_length=1)
    adapter: str = ""
    base_url_env: str = "MINDFORGE_POLICY_URL"
    api_key_env: str = "OPENAI_API_KEY"
    context_window: int = Field(default=32768, gt=0)
    max_tokens: int = Field(default=2048, gt=0)

    @field_validator("base_url_env")
    @classmethod
    def _base_url_env(cls, value: str) -> str:
        return _check_env_name(value)

    @field_validator("api_key_env")
    @classmethod
    def _api_key_env(cls, value: str) -> str:
        return _check_env_name(value) if value else value

    @field_validator("max_tokens")
    @classmethod
    def _fits_context(cls, value: int, info: ValidationInfo) -> int:
        window = info.data.get("context_window")
        if window is not None and value >= window:
            raise ValueError(f"{value} tokens per call does not fit the context window of {window} tokens")
        return value


class ProviderOptions(_Section):
    """``[provider_options]``: sampling parameters sent with every model call.

    Attributes:
        temperature: sampling temperature (0 to 2).
        top_p: nucleus sampling mass (0 to 1).
        seed: sampling seed sent with each call; None = none sent.
        stop: stop strings sent with each call (at most 4, none empty); the endpoint
            ends the reply before the first one. ``[]`` (the default) sends none.
    """

    temperature: float = Field(default=0.7, ge=0.0, le=2.0, allow_inf_nan=False)
    top_p: float = Field(default=1.0, ge=0.0, le=1.0, allow_inf_nan=False)
    seed: int | None = None
    stop: list[str] = Field(default_factory=list, max_length=MAX_STOP_SEQUENCES, json_schema_extra=OMIT_AT_DEFAULT)

    @field_validator("stop")
    @classmethod
    def _stop(cls, value: list[str]) -> list[str]:
        if any(not item for item in value):
            raise ValueError("a stop string cannot be empty")
        if len(set(value)) != len(value):
            raise ValueError("stop strings listed twice")
        return value


class ToolsSection(_Section):
    """``[tools]``: what the agent may do and how its actions are written.

    Attributes:
        allow: subset of ``bash``, ``read_file``, ``write_file``, ``finish``.
        action_format: how a reply is turned into an action:

            - ``json``: a JSON object ``{"tool": ..., "arguments": {...}}`` in the reply text;
            - ``tool_calls``: the API's native tool calls;
            - ``fenced_bash``: the reply's first fenced block (```` ```bash ````, ``sh``,
              ``shell`` or no language) is a bash command;
            - ``command``: completion style, the reply IS one shell command line (its
              first non-empty line; a leading ``$ `` and surrounding backticks are
              stripped).

            In the two shell formats only ``bash`` and ``finish`` can be allowed, and the
            reply ``done`` (or ``exit``) is the ``finish`` action.
        bash_timeout_sec: wall-clock limit of one bash command, in seconds.
        max_observation_bytes: the most bytes of each output stream shown to the model.
        observation_truncation: which bytes of a longer stream are kept: ``head_tail``
            (the first and last halves, the default), ``head`` or ``tail``; a marker line
            says how many bytes were left out.
        show_exit_code: show the command's exit code in each observation.
        show_turn_budget: end each observation with the ``[turn N/M; S s left]`` line.
        constrained_decoding: in the ``json`` format, ask the endpoint to sample each
            reply under the JSON schema of the allowed actions (OpenAI structured
            outputs, ``response_format`` of type ``json_schema``; llama.cpp turns it into
            a grammar), so every reply is one action object and ends where the object
            closes. An engine without constrained decoding samples free text. Only the
            ``json`` format may set it.
    """

    allow: list[ToolName] = Field(default_factory=lambda: list(KNOWN_TOOLS))
    action_format: ActionFormat = "json"
    bash_timeout_sec: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    max_observation_bytes: int = Field(default=16384, gt=0)
    observation_truncation: Truncation = Field(default="head_tail", json_schema_extra=OMIT_AT_DEFAULT)
    show_exit_code: bool = Field(default=True, json_schema_extra=OMIT_AT_DEFAULT)
    show_turn_budget: bool = Field(default=True, json_schema_extra=OMIT_AT_DEFAULT)
    constrained_decoding: bool = Field(default=False, json_schema_extra=OMIT_AT_DEFAULT)

    @field_validator("allow")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        dupes = sorted({tool for tool in value if value.count(tool) > 1})
        if dupes:
            raise ValueError(f"tools listed twice: {', '.join(dupes)}")
        return value


def _check_template(value: str) -> str:
    try:
        fields = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(value) if name is not None]
    except ValueError as exc:
        raise ValueError(f"malformed placeholder ({exc}); write literal braces as '{{{{' and '}}}}'") from None
    for name, spec, conv in fields:
        if name != "instruction" or spec or conv:
            raise ValueError(f"unknown placeholder {{{name}}}; only {{instruction}} is filled in")
    if not fields:
        raise ValueError("the template must contain the {instruction} placeholder")
    return value


#: the retrieval sizes a contract may ask for (search edits try these)
EXPERIENCE_KS: tuple[int, ...] = (0, 1, 2, 4, 8)
#: the kind of the embedded resource that carries an experience snapshot
EXPERIENCE_KIND = "experience"
#: where a contract carries its experience snapshot (``[[resources.embedded]]`` path)
EXPERIENCE_PATH = ".mindforge/experience.json"


class ExperienceSettings(_Section):
    """``[resources.experience]``: per-task retrieval from the lineage's experience library.

    The snapshot itself is the ``[[resources.embedded]]`` entry of kind ``experience``
    whose ``sha256`` equals ``snapshot`` (checked on load), so the contract hash covers it
    and a trial is reproducible from (contract, task) alone (:mod:`mindforge.experience`).

    Attributes:
        snapshot: the snapshot's id: sha256 (hex) of its canonical JSON.
        k: how many entries to show per task (0, 1, 2, 4 or 8), ranked by BM25 over
            instructions, never one mined from the task itself.
        provenance: which entries may be shown: ``any``, ``oracle`` (reference solutions)
            or ``model`` (the lineage's own validated passes).
    """

    snapshot: str
    k: int = 4
    provenance: Literal["any", "oracle", "model"] = "any"

    @field_validator("snapshot")
    @classmethod
    def _snapshot(cls, value: str) -> str:
        if not re.fullmatch(r"[0-9a-f]{64}", value):
            raise ValueError(f"{value!r} is not a snapshot id (a lowercase hex sha256, 64 characters)")
        return value

    @field_validator("k")
    @classmethod
    def _k(cls, value: int) -> int:
        if value not in EXPERIENCE_KS:
            raise ValueError(f"k = {value} is not one of {list(EXPERIENCE_KS)}")
        return value


class ResourcesSection(_Section):
    """``[resources]``: what the model is told, and files carried in the contract.

    Attributes:
        system_prompt: the system message; the agent appends the description of the
            allowed tools and of the action format.
        append_system_prompt: text appended after the system prompt.
        instruction_template: the first user message; ``{instruction}`` is replaced by
            the task's instruction (write literal braces as ``{{`` and ``}}``).
        embedded: files carried in the contract (paths unique).
        examples: worked examples shown as few-shot turns before the task, in the
            contract's action format (:mod:`mindforge.hcp.examples`); at most 8, names
            unique.
        experience: retrieval from an experience snapshot carried in ``embedded``
            (:class:`ExperienceSettings`); None (the default, left out of the document) = none.
        example_style: how worked examples (the contract's and retrieved ones) are shown:
            ``turns`` (the default) as the conversation a trial has, one action and its
            observation per step and a final ``finish``; ``compact`` as one user turn and one
            action each, its steps joined with `` && `` and no outputs (a few hundred prompt
            tokens fewer per example: what a ``single_command`` contract always shows).
    """

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    append_system_prompt: str = ""
    instruction_template: str = "{instruction}"
    embedded: list[EmbeddedResource] = Field(default_factory=list)
    examples: list[WorkedExample] = Field(
        default_factory=list, max_length=MAX_EXAMPLES, json_schema_extra=OMIT_AT_DEFAULT
    )
    experience: ExperienceSettings | None = None
    example_style: Literal["turns", "compact"] = Field(default="turns", json_schema_extra=OMIT_AT_DEFAULT)

    @field_validator("instruction_template")
    @classmethod
    def _template(cls, value: str) -> str:
        return _check_template(value)

    @field_validator("embedded")
    @classmethod
    def _unique_paths(cls, value: list[EmbeddedResource]) -> list[EmbeddedResource]:
        paths = [item.path for item in value]
        dupes = sorted({p for p in paths if paths.count(p) > 1})
        if dupes:
            raise ValueError(f"embedded paths listed twice: {', '.join(dupes)}")
        return value

    @field_validator("examples")
    @classmethod
    def _unique_names(cls, value: list[WorkedExample]) -> list[WorkedExample]:
        names = [item.name for item in value if item.name]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"example names listed twice: {', '.join(dupes)}")
        return value

    def example(self, name: str) -> WorkedExample | None:
        """The worked example named ``name``, or None."""
        return next((item for item in self.examples if item.name == name), None)

    def resource(self, path: str) -> EmbeddedResource | None:
        """The embedded resource at ``path``, or None."""
        return next((item for item in self.embedded if item.path == path), None)


class SkillsSection(_Section):
    """``[skills]``: embedded resources the agent copies into the workspace as helpers.

    Attributes:
        paths: each the path of a ``[[resources.embedded]]`` entry (relative).
    """

    paths: list[str] = Field(default_factory=list)

    @field_validator("paths")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        for item in value:
            check_relative_path(item)
        dupes = sorted({p for p in value if value.count(p) > 1})
        if dupes:
            raise ValueError(f"skill paths listed twice: {', '.join(dupes)}")
        return value


class HooksSection(_Section):
    """``[hooks]``: harness behaviour around the model's turns.

    Attributes:
        plan_first: ask for a plan before the first action.
        verify_before_finish: ask the model to check its work once before accepting ``finish``.
        on_command_error: what the model sees after a failing command: the output's
            ``tail``, the ``full`` output (up to ``tools.max_observation_bytes``), or
            ``none`` beyond the exit code.
    """

    plan_first: bool = False
    verify_before_finish: bool = False
    on_command_error: Literal["tail", "full", "none"] = "tail"


class WorkspaceSection(_Section):
    """``[workspace]``: where the agent works and its turn and token limits.

    Attributes:
        root: absolute working directory inside the sandbox.
        max_turns: the most model calls per trial.
        max_total_tokens: token budget per trial (prompt + completion over all calls);
            None = unlimited.
        mode: ``multi_turn`` (act, observe, repeat until ``finish`` or a limit; the
            default) or ``single_command``: the model gets one action; once it has run,
            the agent phase ends and the verifier runs (one model call per trial, plus
            the plan turn with ``hooks.plan_first``); an unusable reply ends it at once.
    """

    root: str = "/app"
    max_turns: int = Field(default=40, gt=0)
    max_total_tokens: int | None = Field(default=None, gt=0)
    mode: AgentMode = Field(default="multi_turn", json_schema_extra=OMIT_AT_DEFAULT)

    @field_validator("root")
    @classmethod
    def _root(cls, value: str) -> str:
        pure = PurePosixPath(value)
        if not pure.is_absolute() or ".." in pure.parts or "\\" in value:
            raise ValueError(f"{value!r} is not an absolute POSIX path without '..'")
        return value


class PromptsSection(_Section):
    """``[prompts]``: prompts used outside the agent loop, versioned with the contract.

    Attributes:
        discovery: the Discovery stage's task-proposal prompt: the system message of the
            proposal request (plain text); the pool summary and the reply format go in
            the user message (``mindforge.discovery.proposal``).
        discovery_mode: what the model is asked for. ``task`` (the default): whole tasks
            in free text (instruction, Dockerfile, tests, solution), for models that can
            write them; ``families``: a task family and its parameters as JSON, under a
            JSON-schema grammar where the engine has one (``mindforge.discovery.family_proposal``),
            for small models.
    """

    discovery: str = Field(default=DEFAULT_DISCOVERY_PROMPT, min_length=1)
    discovery_mode: Literal["task", "families"] = Field(default="task", json_schema_extra=OMIT_AT_DEFAULT)
