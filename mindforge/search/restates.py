"""Does a worked example restate a bundled task's reference solution?

Any bundled task (under ``tasks/``) can be a lineage's sealed task, so a worked example
shipped for the search to use must not carry a bundled task's answer. Two command lines
*share their program and options* when their command shapes are equal
(:func:`mindforge.tasks.shape.command_shape`, the one shell-command shape of the project:
programs and options kept, paths, literals, redirection targets and setup commands
dropped): ``wc -l < /app/planets.txt > /app/n.txt`` and ``wc -l < /app/access.log >
/app/line_count.txt`` have one shape. A solution is cut into commands as experience
mining cuts it (:func:`mindforge.experience.mining.solution_commands`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from mindforge.experience.mining import solution_commands
from mindforge.hcp import WorkedExample
from mindforge.tasks.shape import Command, command_shape


def solution_shapes(solutions: Mapping[str, str]) -> dict[tuple[Command, ...], set[str]]:
    """Command shape -> ids of the solutions that have it.

    Args:
        solutions: task id -> its reference solution's text (a ``solve.sh``).

    Each command of a solution (:func:`solution_commands`) is shaped on its own; a
    command with no shape (nothing but setup) is left out.
    """
    shapes: dict[tuple[Command, ...], set[str]] = {}
    for task_id, text in solutions.items():
        for command in solution_commands(text):
            shape = command_shape(command)
            if shape:
                shapes.setdefault(shape, set()).add(task_id)
    return shapes


def folder_solutions(root: Path, *, relative_to: Path | None = None) -> dict[str, str]:
    """Task id -> reference solution of every task under ``root`` (a task folder or a folder of them).

    The id is the task folder's path relative to ``relative_to`` (default ``root``'s parent).
    """
    base = relative_to or root.parent
    return {
        str(solve.parent.parent.relative_to(base)): solve.read_text(encoding="utf-8")
        for solve in sorted(root.rglob("solution/solve.sh"))
    }


def bundled_solution_shapes(tasks_root: Path) -> dict[tuple[Command, ...], set[str]]:
    """Command shape -> ids (folder paths under ``tasks_root``) of the bundled tasks whose solution has it."""
    return solution_shapes(folder_solutions(tasks_root, relative_to=tasks_root))


def restatements(examples: Iterable[WorkedExample], solutions: Mapping[str, str]) -> dict[str, list[str]]:
    """Example name -> the tasks (ids of ``solutions``) one of its command lines shares program and options with.

    An example absent from the result restates none of them.
    """
    return restated_commands({e.name: [s.command for s in e.steps] for e in examples}, solutions)


def restated_commands(named: Mapping[str, list[str]], solutions: Mapping[str, str]) -> dict[str, list[str]]:
    """Name -> the tasks (ids of ``solutions``) one of its commands shares program and options with.

    Args:
        named: a name (an example, a library entry) -> its command lines.
        solutions: task id -> reference solution text.
    """
    shapes = solution_shapes(solutions)
    out: dict[str, list[str]] = {}
    for name, commands in named.items():
        hits = set().union(*(shapes.get(command_shape(c), set()) for c in commands))
        if hits:
            out[name] = sorted(hits)
    return out


def restated_tasks(examples: Iterable[WorkedExample], tasks_root: Path) -> dict[str, list[str]]:
    """Example name -> the bundled tasks (under ``tasks_root``) one of its command lines restates."""
    return restatements(examples, folder_solutions(tasks_root, relative_to=tasks_root))
