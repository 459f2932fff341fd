"""Section models of an HCP contract (see :mod:`mindforge.hcp.model` for the whole contract).

Each section keeps keys it does not know (``extra="allow"``) so that rewriting a file
loses nothing, and validates known keys strictly (no string-to-number coercion).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import string
from pathlib import PurePosixPath
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from mindforge.hcp.defaults import DEFAULT_DISCOVERY_PROMPT, DEFAULT_SYSTEM_PROMPT

ToolName = Literal["bash", "read_file", "write_file", "finish"]

#: the tools a MindForge harness can offer (``tools.allow`` is a subset)
KNOWN_TOOLS: tuple[str, ...] = get_args(ToolName)

_NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")
_REVISION_RE = re.compile(r"[0-9A-Za-z][0-9A-Za-z._+-]*")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")


def check_relative_path(value: str) -> str:
    """Check that ``value`` is a normalised relative POSIX path that stays in the workspace.

    Raises:
        ValueError: empty, absolute, containing ``..`` or backslashes, or not normalised.
    """
    if not value:
        raise ValueError("empty path")
    if "\\" in value:
        raise ValueError(f"path {value!r} contains a backslash; use '/'")
    pure = PurePosixPath(value)
    if pure.is_absolute():
        raise ValueError(f"path {value!r} is absolute; paths are relative to the workspace root")
    if ".." in pure.parts:
        raise ValueError(f"path {value!r} escapes the workspace ('..')")
    if str(pure) != value or "." in pure.parts:
        raise ValueError(f"path {value!r} is not normalised; write {str(pure)!r}")
    return value


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
    """``[provider_options]``: sampling parameters sent with every model call."""

    temperature: float = Field(default=0.7, ge=0.0, le=2.0, allow_inf_nan=False)
    top_p: float = Field(default=1.0, ge=0.0, le=1.0, allow_inf_nan=False)
    seed: int | None = None


class ToolsSection(_Section):
    """``[tools]``: what the agent may do and how its actions are written.

    Attributes:
        allow: subset of ``bash``, ``read_file``, ``write_file``, ``finish``.
        action_format: ``json`` (a JSON object in the reply text) or ``tool_calls``
            (the API's native tool calls).
        bash_timeout_sec: wall-clock limit of one bash command, in seconds.
        max_observation_bytes: the most bytes of a tool result shown to the model.
    """

    allow: list[ToolName] = Field(default_factory=lambda: list(KNOWN_TOOLS))
    action_format: Literal["json", "tool_calls"] = "json"
    bash_timeout_sec: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    max_observation_bytes: int = Field(default=16384, gt=0)

    @field_validator("allow")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        dupes = sorted({tool for tool in value if value.count(tool) > 1})
        if dupes:
            raise ValueError(f"tools listed twice: {', '.join(dupes)}")
        return value


class EmbeddedResource(_Section):
    """``[[resources.embedded]]``: a file carried inside the contract, checked by sha256.

    Attributes:
        kind: what it is (``skill``, ``file``, ...).
        path: where it lands, relative to the workspace root; never escapes it.
        encoding: how ``content`` is written: ``utf-8`` text or ``base64``.
        content: the file's content in that encoding.
        sha256: hex sha256 of the decoded bytes, checked on load.
    """

    kind: str = Field(min_length=1)
    path: str
    encoding: Literal["utf-8", "base64"] = "utf-8"
    content: str
    sha256: str

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        return check_relative_path(value)

    @field_validator("content")
    @classmethod
    def _content(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("encoding") == "base64":
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ValueError(f"not valid base64: {exc}") from None
        return value

    @field_validator("sha256")
    @classmethod
    def _sha256(cls, value: str, info: ValidationInfo) -> str:
        if not _SHA256_RE.fullmatch(value):
            raise ValueError(f"{value!r} is not a lowercase hex sha256 (64 characters)")
        if "content" in info.data and "encoding" in info.data:
            actual = hashlib.sha256(_decode(info.data["content"], info.data["encoding"])).hexdigest()
            if actual != value:
                raise ValueError(f"sha256 mismatch: declared {value}, content hashes to {actual}")
        return value

    @property
    def data(self) -> bytes:
        """The decoded bytes of the file."""
        return _decode(self.content, self.encoding)


def _decode(content: str, encoding: str) -> bytes:
    return base64.b64decode(content) if encoding == "base64" else content.encode("utf-8")


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


class ResourcesSection(_Section):
    """``[resources]``: what the model is told, and files carried in the contract.

    Attributes:
        system_prompt: the system message; the agent appends the description of the
            allowed tools and of the action format.
        append_system_prompt: text appended after the system prompt.
        instruction_template: the first user message; ``{instruction}`` is replaced by
            the task's instruction (write literal braces as ``{{`` and ``}}``).
        embedded: files carried in the contract (paths unique).
    """

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    append_system_prompt: str = ""
    instruction_template: str = "{instruction}"
    embedded: list[EmbeddedResource] = Field(default_factory=list)

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
    """

    root: str = "/app"
    max_turns: int = Field(default=40, gt=0)
    max_total_tokens: int | None = Field(default=None, gt=0)

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
    """

    discovery: str = Field(default=DEFAULT_DISCOVERY_PROMPT, min_length=1)
