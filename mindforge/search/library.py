"""What configuration search can add to a contract: shipped skills, and the user's own worked examples.

- skills: helper scripts shipped with MindForge, ``mindforge/search/skills/*.sh``
  (op ``add_skill``); generic tools (run the tests, find files, show a tree), no answers.
- worked examples: none ship. Any bundled task can land in a lineage's sealed split, so
  an example written by looking at bundled tasks would carry the test tasks' answers
  into the search and void the sealed figure. A user may seed a lineage with a folder
  of their own (``--examples DIR``, :func:`load_example_folder`): each ``*.toml`` file
  is one :class:`mindforge.hcp.WorkedExample` without its ``name`` (the file's stem is
  the name). The search offers each as op ``add_example`` (:mod:`mindforge.search.edits`).
  A lineage's own experience (validated search-split solutions) is the default source
  of examples.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from importlib import resources
from pathlib import Path

from pydantic import ValidationError

from mindforge.errors import InputError
from mindforge.hcp import WorkedExample
from mindforge.hcp.io import validation_problems

#: the most examples a folder given to ``--examples`` may hold (the search offers each one)
MAX_FOLDER_EXAMPLES = 64


@lru_cache(maxsize=1)
def skill_library() -> dict[str, str]:
    """The skills shipped with MindForge (``mindforge/search/skills/*.sh``): file name -> script text."""
    folder = resources.files("mindforge.search") / "skills"
    return {
        entry.name: entry.read_text(encoding="utf-8")
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".sh")
    }


def load_example_file(path: Path) -> WorkedExample:
    """One worked-example TOML file (``instruction`` and ``[[steps]]``), named by its stem.

    Raises:
        InputError: the file is unreadable, not TOML, names itself (``name``), or is not
            a valid worked example (the error names the file and the field).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, "", f"cannot read the file: {exc}") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(path, "", f"malformed TOML: {exc}") from None
    if "name" in document:
        raise InputError(path, "name", "an example is named by its file; drop the key")
    try:
        return WorkedExample.model_validate({"name": path.stem, **document})
    except ValidationError as exc:
        field, reason = validation_problems(exc)[0]
        raise InputError(path, field, reason) from None


def load_example_folder(folder: Path) -> list[WorkedExample]:
    """The worked examples of a folder (its ``*.toml`` files, sorted by name), for ``--examples DIR``.

    Args:
        folder: a directory of worked-example TOML files in the shape of
            :class:`mindforge.hcp.WorkedExample` without ``name``::

                instruction = "Write the number of lines of notes.txt to count.txt."
                [[steps]]
                command = "wc -l < notes.txt > count.txt"

    Returns:
        the examples, named by their files' stems (1 to :data:`MAX_FOLDER_EXAMPLES`).

    Raises:
        InputError: the folder is missing or holds no ``*.toml`` file or too many, or a
            file is invalid (see :func:`load_example_file`; the error names the file and
            the field).
    """
    if not folder.is_dir():
        raise InputError(folder, "--examples", "no such directory")
    files = sorted(p for p in folder.iterdir() if p.suffix == ".toml" and p.is_file())
    if not files:
        raise InputError(folder, "--examples", "the folder holds no *.toml worked example")
    if len(files) > MAX_FOLDER_EXAMPLES:
        raise InputError(folder, "--examples", f"{len(files)} examples; at most {MAX_FOLDER_EXAMPLES}")
    return [load_example_file(p) for p in files]

