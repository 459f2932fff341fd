"""Does a worked example restate a bundled task's reference solution? (issue 17, item 7)

Any bundled task (under ``tasks/``) can be a lineage's sealed task, so a worked example
shipped for the search to use must not carry a bundled task's answer. Two command lines
*share their program and options* when their shapes are equal: each line is cut into
shell words, the programs (the first word of each simple command, after ``|``, ``&&``,
``||``, ``;``, assignments such as ``LC_ALL=C`` skipped) and the options (words that
start with ``-``) and operators (pipes, redirections) are kept, and every other word - a
path, a literal, a number - becomes ``ARG``. ``wc -l < /app/planets.txt > /app/n.txt``
and ``wc -l < /app/access.log > /app/line_count.txt`` have the one shape
``wc -l < ARG > ARG``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from pathlib import Path

from mindforge.hcp import WorkedExample

#: words that end one simple command and start the next
_SEPARATORS = frozenset({"|", "||", "&&", ";", "&", "|&", "(", ")"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def command_shape(line: str) -> str:
    """The line's programs, options and operators, every other word ``ARG`` (see the module docstring).

    A line the shell lexer cannot split (an open quote) falls back to splitting on blanks.
    """
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:
        words = line.split()
    out: list[str] = []
    at_start = True
    for word in words:
        if word in _SEPARATORS or set(word) <= set("<>&|;()0123456789") and any(c in word for c in "<>|&;()"):
            out.append(word)
            at_start = word in _SEPARATORS
            continue
        if at_start and _ASSIGNMENT.match(word):
            continue
        if at_start:
            out.append(word.rsplit("/", 1)[-1])
            at_start = word in ("sudo", "env", "xargs", "time", "nohup", "exec")
        elif word.startswith("-") and len(word) > 1:
            out.append(word)
        else:
            out.append("ARG")
    return " ".join(out)


def solution_lines(solve_sh: Path) -> list[str]:
    """The command lines of a reference solution: no shebang, blank, comment or ``set`` lines."""
    out = []
    for raw in solve_sh.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or line == "set" or line.startswith("set "):
            continue
        out.append(line)
    return out


def bundled_solution_shapes(tasks_root: Path) -> dict[str, set[str]]:
    """Command shape -> ids (folder paths under ``tasks_root``) of the bundled tasks whose solution has it."""
    shapes: dict[str, set[str]] = {}
    for solve in sorted(tasks_root.rglob("solution/solve.sh")):
        task_id = str(solve.parent.parent.relative_to(tasks_root))
        for line in solution_lines(solve):
            shapes.setdefault(command_shape(line), set()).add(task_id)
    return shapes


def restated_tasks(examples: Iterable[WorkedExample], tasks_root: Path) -> dict[str, list[str]]:
    """Example name -> the bundled tasks one of its command lines shares program and options with.

    An example absent from the result restates no bundled task's solution.
    """
    shapes = bundled_solution_shapes(tasks_root)
    out: dict[str, list[str]] = {}
    for example in examples:
        hits = set().union(*(shapes.get(command_shape(s.command), set()) for s in example.steps))
        if hits:
            out[example.name] = sorted(hits)
    return out
