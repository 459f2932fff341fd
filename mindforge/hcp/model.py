"""Pydantic model of an HCP (Harness Context Protocol) contract.

The shape follows Mind Lab's draft HCP RFC-0002: a top-level integer ``version = 1`` and
sections among ``run``, ``env``, ``model``, ``provider_options``, ``tools``, ``skills``,
``prompts``, ``resources``, ``workspace``, ``mcp``, ``hooks`` and ``session``, plus
MindForge's own ``[mindforge]`` section (identity and lineage; see docs/design.md).

Every section keeps keys it does not know and the contract keeps sections it does not
know, so that rewriting a file loses nothing (an RFC rule). Values are validated
strictly: a string where a number is expected is an error, not coerced. Loading from
TOML, secret checks and error reporting live in :mod:`mindforge.hcp.io`.
"""

from __future__ import annotations

import hashlib
import json
from datetime import date, datetime, time
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mindforge.hcp.embedded import EmbeddedResource
from mindforge.hcp.sections import (
    EXPERIENCE_KIND,
    SHELL_FORMAT_TOOLS,
    SHELL_FORMATS,
    HooksSection,
    MindForgeSection,
    ModelSection,
    PromptsSection,
    ProviderOptions,
    ResourcesSection,
    SkillsSection,
    ToolsSection,
    WorkspaceSection,
)

#: the HCP major version this MindForge reads and writes
HCP_VERSION = 1

#: RFC sections MindForge keeps verbatim without interpreting them
OPAQUE_SECTIONS: tuple[str, ...] = ("run", "env", "mcp", "session")


class FieldProblem(Exception):
    """A cross-field defect found after field validation, at a known key path.

    Deliberately not a ``ValueError``, so pydantic lets it through unchanged and the
    loader reports it at ``field`` instead of at the document root.
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


class HCPContract(BaseModel):
    """A whole HCP contract. Immutable; unknown top-level sections are kept as extras.

    Build one with :func:`mindforge.hcp.loads_contract` / ``load_contract`` (which map
    errors to key paths) rather than by hand.
    """

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)

    version: Literal[1]
    mindforge: MindForgeSection
    model: ModelSection
    provider_options: ProviderOptions = Field(default_factory=ProviderOptions)
    tools: ToolsSection = Field(default_factory=ToolsSection)
    resources: ResourcesSection = Field(default_factory=ResourcesSection)
    skills: SkillsSection = Field(default_factory=SkillsSection)
    hooks: HooksSection = Field(default_factory=HooksSection)
    workspace: WorkspaceSection = Field(default_factory=WorkspaceSection)
    prompts: PromptsSection = Field(default_factory=PromptsSection)
    run: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, Any] = Field(default_factory=dict)
    mcp: dict[str, Any] = Field(default_factory=dict)
    session: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _cross_checks(self) -> HCPContract:
        embedded = {item.path for item in self.resources.embedded}
        for index, path in enumerate(self.skills.paths):
            if path not in embedded:
                raise FieldProblem(
                    f"skills.paths[{index}]", f"{path!r} is not the path of a [[resources.embedded]] entry"
                )
        if self.mindforge.parent and not self.mindforge.edit.strip():
            raise FieldProblem(
                "mindforge.edit", "a derived contract (parent set) must record the edit that produced it"
            )
        if self.mindforge.parent == self.ref:
            raise FieldProblem("mindforge.parent", f"a contract cannot be its own parent ({self.ref})")
        self._check_action_format()
        self._check_experience()
        return self

    def _check_experience(self) -> None:
        settings = self.resources.experience
        kinds = [i for i, item in enumerate(self.resources.embedded) if item.kind == EXPERIENCE_KIND]
        if len(kinds) > 1:
            raise FieldProblem(f"resources.embedded[{kinds[1]}].kind", "a contract carries one experience snapshot")
        if settings is None:
            if kinds:
                raise FieldProblem(
                    f"resources.embedded[{kinds[0]}]", "an experience snapshot without [resources.experience]"
                )
            return
        if not kinds or self.resources.embedded[kinds[0]].sha256 != settings.snapshot:
            raise FieldProblem(
                "resources.experience.snapshot",
                f"no [[resources.embedded]] entry of kind {EXPERIENCE_KIND!r} with sha256 {settings.snapshot}",
            )

    @property
    def experience_resource(self) -> EmbeddedResource | None:
        """The embedded experience snapshot named by ``resources.experience``, or None."""
        settings = self.resources.experience
        if settings is None:
            return None
        return next((i for i in self.resources.embedded if i.kind == EXPERIENCE_KIND), None)

    def _check_action_format(self) -> None:
        fmt, allow = self.tools.action_format, list(self.tools.allow)
        if self.tools.constrained_decoding and fmt != "json":
            raise FieldProblem(
                "tools.constrained_decoding",
                f"constrained decoding samples replies under the json action format's schema; "
                f"the {fmt} format has none",
            )
        if fmt not in SHELL_FORMATS:
            return
        extra = [tool for tool in allow if tool not in SHELL_FORMAT_TOOLS]
        if extra or "bash" not in allow:
            raise FieldProblem(
                "tools.allow",
                f"the {fmt} action format acts through bash alone (and finish by replying 'done'); "
                f"allow bash and optionally finish, not {allow}",
            )
        if fmt == "command":
            for i, example in enumerate(self.resources.examples):
                for j, step in enumerate(example.steps):
                    if "\n" in step.command.strip():
                        raise FieldProblem(
                            f"resources.examples[{i}].steps[{j}].command",
                            "the command action format takes one command line per reply; join the lines "
                            "with ';' or '&&'",
                        )

    @property
    def ref(self) -> str:
        """``"name@revision"``."""
        return f"{self.mindforge.name}@{self.mindforge.revision}"

    def to_document(self) -> dict[str, Any]:
        """The full TOML document as plain data, defaults filled in, unknown keys kept.

        Returns:
            a dict ready for ``tomli_w``; None values, empty opaque RFC sections
            (``run``, ``env``, ``mcp``, ``session``) and keys added after the shipped
            1.0.0 contracts that hold their default (fields marked ``OMIT_AT_DEFAULT``:
            ``provider_options.stop``, ``tools.observation_truncation``,
            ``tools.show_exit_code``, ``tools.show_turn_budget``, ``resources.examples``,
            ``resources.example_style``, ``workspace.mode``) are left out. Such a default is the behaviour from before
            the key existed, so contracts written before it keep their content hash;
            never change one of these defaults (add a value instead).
        """
        doc = self.model_dump(mode="python", exclude_none=True)
        for name in OPAQUE_SECTIONS:
            if not doc.get(name):
                doc.pop(name, None)
        for name in type(self).model_fields:
            section = getattr(self, name)
            if isinstance(section, BaseModel) and name in doc:
                _drop_late_defaults(section, doc[name])
        return doc

    @property
    def content_hash(self) -> str:
        """sha256 (hex) of the canonical JSON of :meth:`to_document` (sorted keys).

        The hash covers the resolved document, unknown sections included: a file that
        spells out a default and one that omits it hash alike, key order and comments do
        not count, and a default changed in MindForge changes the hash of contracts that
        rely on it (their behaviour changed too).
        """
        return hashlib.sha256(canonical_json(self.to_document()).encode("utf-8")).hexdigest()

    def unknown_keys(self) -> list[str]:
        """Key paths MindForge keeps but does not interpret (unknown sections and keys)."""
        found = [str(key) for key in (self.__pydantic_extra__ or {})]
        for name in type(self).model_fields:
            section = getattr(self, name)
            if isinstance(section, BaseModel):
                found += [f"{name}.{key}" for key in (section.__pydantic_extra__ or {})]
        for index, item in enumerate(self.resources.embedded):
            found += [f"resources.embedded[{index}].{key}" for key in (item.__pydantic_extra__ or {})]
        for index, example in enumerate(self.resources.examples):
            found += [f"resources.examples[{index}].{key}" for key in (example.__pydantic_extra__ or {})]
            for step_index, step in enumerate(example.steps):
                extra = step.__pydantic_extra__ or {}
                found += [f"resources.examples[{index}].steps[{step_index}].{key}" for key in extra]
        return found


@cache
def _late_defaults(section_type: type[BaseModel]) -> tuple[tuple[str, Any], ...]:
    """``(key, default)`` of a section's late-added keys (marked ``OMIT_AT_DEFAULT``), computed once."""
    out = []
    for key, field in section_type.model_fields.items():
        extra = field.json_schema_extra
        if isinstance(extra, dict) and extra.get("hcp_omit_at_default"):
            factory = field.default_factory
            default = factory() if factory is not None else field.default  # type: ignore[call-arg]  # a factory may take the data; these take none
            out.append((key, default))
    return tuple(out)


def _drop_late_defaults(section: BaseModel, table: dict[str, Any]) -> None:
    """Remove the section's late-added keys (``OMIT_AT_DEFAULT``) that hold their default."""
    for key, default in _late_defaults(type(section)):
        if key in table and table[key] == default:
            del table[key]


def _json_default(value: object) -> object:
    # TOML dates and times have no JSON type; tag them so that a date and the string
    # of the same date do not hash alike
    if isinstance(value, (datetime, date, time)):
        return {"$" + type(value).__name__: value.isoformat()}
    raise TypeError(f"cannot hash a value of type {type(value).__name__}")


def canonical_json(document: dict[str, Any]) -> str:
    """Canonical serialisation used for content hashes: JSON, sorted keys, no spaces."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_default)
