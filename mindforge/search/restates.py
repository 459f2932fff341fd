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

from collections.abc import Iterable
from pathlib import Path

from mindforge.experience.mining import solution_commands
from mindforge.hcp import WorkedExample
from mindforge.tasks.shape import Command, command_shape


def bundled_solution_shapes(tasks_root: Path) -> dict[tuple[Command, ...], set[str]]:
    """Command shape -> ids (folder paths under ``tasks_root``) of the bundled tasks whose solution has it.

    Each command of a solution (:func:`solution_commands`) is shaped on its own; a
    command with no shape (nothing but setup) is left out.
    """
    shapes: dict[tuple[Command, ...], set[str]] = {}
    for solve in sorted(tasks_root.rglob("solution/solve.sh")):
        task_id = str(solve.parent.parent.relative_to(tasks_root))
        for command in solution_commands(solve.read_text(encoding="utf-8")):
            shape = command_shape(command)
            if shape:
                shapes.setdefault(shape, set()).add(task_id)
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
