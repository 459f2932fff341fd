"""What configuration search can add to a contract, shipped with MindForge as data.

- skills: helper scripts, ``mindforge/search/skills/*.sh`` (op ``add_skill``);
- worked examples: small solved generic shell chores, ``mindforge/search/examples/*.toml``
  (op ``add_example``), each one :class:`mindforge.hcp.WorkedExample` without its
  ``name`` (the file's stem is the name). They are about generic chores on their own
  files and words, never copies of a bundled task, so no example answers a task.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from importlib import resources

from pydantic import ValidationError

from mindforge.errors import InputError
from mindforge.hcp import WorkedExample
from mindforge.hcp.io import validation_problems


@lru_cache(maxsize=1)
def skill_library() -> dict[str, str]:
    """The skills shipped with MindForge (``mindforge/search/skills/*.sh``): file name -> script text."""
    folder = resources.files("mindforge.search") / "skills"
    return {
        entry.name: entry.read_text(encoding="utf-8")
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".sh")
    }


@lru_cache(maxsize=1)
def example_library() -> dict[str, WorkedExample]:
    """The worked examples shipped with MindForge: name (file stem) -> example, sorted by name.

    Raises:
        InputError: a library file is not TOML, names itself, or is not a valid worked
            example (the error names the file and the field).
    """
    folder = resources.files("mindforge.search") / "examples"
    out: dict[str, WorkedExample] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".toml"):
            continue
        name = entry.name.removesuffix(".toml")
        try:
            document = tomllib.loads(entry.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise InputError(entry, "", f"malformed TOML: {exc}") from None
        if "name" in document:
            raise InputError(entry, "name", "a library example is named by its file; drop the key")
        try:
            out[name] = WorkedExample.model_validate({"name": name, **document})
        except ValidationError as exc:
            field, reason = validation_problems(exc)[0]
            raise InputError(entry, field, reason) from None
    return out
