"""The structure of one proposed task, checked strictly (never patched).

A proposal is the JSON object the model writes for one task (see
:data:`mindforge.discovery.proposal.REPLY_FORMAT`). Structural checks (types, required
and unknown keys, ids, relative paths) are pydantic field checks; the rules that depend
on the deployment (allowed base images, size limits) come in through the validation
context as a :class:`ProposalRules`.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from mindforge.hcp.sections import check_relative_path
from mindforge.tasks.image_map import normalize_ref

TASK_ID_RE = re.compile(r"[a-z0-9][a-z0-9-]{1,46}[a-z0-9]")
CATEGORY_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,47}")
_FROM_RE = re.compile(r"^FROM\s+(?P<args>.+)$", re.IGNORECASE)
_INSTRUCTION_RE = re.compile(r"^(?P<word>[A-Za-z]+)\b")


class ProposalRules(BaseModel):
    """Deployment rules a proposal must follow.

    Attributes:
        allowed_bases: image references every ``FROM`` must name (compared in Docker's
            normal form); a later stage may also start ``FROM`` an earlier stage's alias.
        max_file_bytes: the most UTF-8 bytes of any one file (instruction, Dockerfile,
            scripts, environment and test files).
        max_total_bytes: the most UTF-8 bytes of all files of one proposal together.
        max_files: the most environment files plus test files.
        max_instruction_chars: the longest instruction, in characters.
    """

    model_config = ConfigDict(frozen=True)

    allowed_bases: tuple[str, ...] = ("mindforge/base:bookworm",)
    max_file_bytes: int = Field(default=64 * 1024, gt=0)
    max_total_bytes: int = Field(default=256 * 1024, gt=0)
    max_files: int = Field(default=32, ge=0)
    max_instruction_chars: int = Field(default=8000, gt=0)


DEFAULT_RULES = ProposalRules()


def _relative_paths(value: dict[str, str], *, reserved: str) -> dict[str, str]:
    for path in value:
        check_relative_path(path)
        if path == reserved:
            raise ValueError(f"{path!r} is written from its own field; do not list it here")
    for path in value:
        for parent in PurePosixPath(path).parents:
            if str(parent) in value:
                raise ValueError(f"{str(parent)!r} is both a file and the folder of {path!r}")
    return value


def dockerfile_problem(text: str, allowed_bases: tuple[str, ...]) -> str | None:
    """Why a Dockerfile does not start from an allowed base, or None when it does.

    Args:
        text: the Dockerfile.
        allowed_bases: allowed image references.

    Returns:
        ``None`` when the first instruction (after comments and ``ARG`` lines) is
        ``FROM`` and every ``FROM`` names an allowed base or an earlier stage; else
        the problem in words.
    """
    allowed = {normalize_ref(b) for b in allowed_bases}
    stages: set[str] = set()
    seen_from = False
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word = _INSTRUCTION_RE.match(line)
        if not seen_from and word and word["word"].upper() == "ARG":
            continue
        match = _FROM_RE.match(line)
        if match is None:
            if not seen_from:
                return f"line {number}: the first instruction must be FROM (got {line[:60]!r})"
            continue
        seen_from = True
        args = match["args"].split()
        if args[0].startswith("--"):
            return f"line {number}: FROM flags ({args[0]}) are not allowed"
        image = args[0]
        if "$" in image:
            return f"line {number}: FROM {image!r} uses a variable; name the base image literally"
        if image.lower() not in stages and normalize_ref(image) not in allowed:
            return f"line {number}: FROM {image!r} is not an allowed base ({', '.join(allowed_bases)})"
        if len(args) >= 3 and args[1].upper() == "AS":
            stages.add(args[2].lower())
    if not seen_from:
        return "no FROM instruction"
    return None


class TaskProposal(BaseModel):
    """One proposed task, as the model wrote it.

    Attributes:
        task_id: lowercase letters, digits and hyphens, 3-48 characters.
        instruction: what the agent is told (``instruction.md``), verbatim.
        category: a lowercase slug (``data-transformation``).
        difficulty: the model's own guess: ``easy``, ``medium`` or ``hard``.
        dockerfile: ``environment/Dockerfile``; every ``FROM`` names an allowed base.
        files: path relative to ``environment/`` (the build context) -> text content.
        test_sh: ``tests/test.sh``, the verifier entry point.
        test_files: path relative to ``tests/`` -> text content (e.g. ``test_outputs.py``).
        solve_sh: ``solution/solve.sh``, the reference solution.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    task_id: str
    instruction: str = Field(min_length=1)
    category: str
    difficulty: Literal["easy", "medium", "hard"]
    dockerfile: str = Field(min_length=1)
    files: dict[str, str]
    test_sh: str = Field(min_length=1)
    test_files: dict[str, str]
    solve_sh: str = Field(min_length=1)

    @field_validator("task_id")
    @classmethod
    def _task_id(cls, value: str) -> str:
        if not TASK_ID_RE.fullmatch(value):
            raise ValueError(f"{value!r} is not a task id (lowercase letters, digits and '-', 3-48 characters)")
        return value

    @field_validator("category")
    @classmethod
    def _category(cls, value: str) -> str:
        if not CATEGORY_RE.fullmatch(value):
            raise ValueError(f"{value!r} is not a category (lowercase letters, digits and '-', 1-48 characters)")
        return value

    @field_validator("instruction", "test_sh", "solve_sh", "dockerfile")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("blank text")
        return value

    @field_validator("files")
    @classmethod
    def _files(cls, value: dict[str, str]) -> dict[str, str]:
        return _relative_paths(value, reserved="Dockerfile")

    @field_validator("test_files")
    @classmethod
    def _test_files(cls, value: dict[str, str]) -> dict[str, str]:
        return _relative_paths(value, reserved="test.sh")

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> TaskProposal:
        rules = (info.context or {}).get("rules") or DEFAULT_RULES
        problem = dockerfile_problem(self.dockerfile, rules.allowed_bases)
        if problem:
            raise ValueError(f"dockerfile: {problem}")
        if len(self.instruction) > rules.max_instruction_chars:
            raise ValueError(
                f"instruction: {len(self.instruction)} characters, over the limit of {rules.max_instruction_chars}"
            )
        count = len(self.files) + len(self.test_files)
        if count > rules.max_files:
            raise ValueError(f"{count} environment and test files, over the limit of {rules.max_files}")
        total = 0
        for name, text in self.all_files().items():
            size = len(text.encode("utf-8"))
            total += size
            if size > rules.max_file_bytes:
                raise ValueError(f"{name}: {size} bytes, over the per-file limit of {rules.max_file_bytes} bytes")
        if total > rules.max_total_bytes:
            raise ValueError(f"{total} bytes in all files, over the limit of {rules.max_total_bytes} bytes")
        return self

    def all_files(self) -> dict[str, str]:
        """Every file of the task directory it becomes (relative path -> text), task.toml aside."""
        out = {
            "instruction.md": self.instruction,
            "environment/Dockerfile": self.dockerfile,
            "tests/test.sh": self.test_sh,
            "solution/solve.sh": self.solve_sh,
        }
        out.update({f"environment/{p}": t for p, t in self.files.items()})
        out.update({f"tests/{p}": t for p, t in self.test_files.items()})
        return out
