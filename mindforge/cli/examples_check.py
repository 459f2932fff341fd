"""Refuse a user's worked examples that carry the answer of a task in the lineage's pool.

Any task of the pool - a hand-written task folder, a pinned sealed task, an instance of a
curriculum family - can land on the selection or sealed split, and leave-one-out
retrieval hides only the attempted task's own entry. A ``--examples`` file whose command
lines share program and options with a pool task's reference solution
(:func:`mindforge.search.restates.restatements`) would carry that task's answer into the
search, and through it into a decision or the sealed figure; it is refused before the
lineage starts, naming the file and the tasks. The same holds for what the root
contract carries: its ``[[resources.examples]]`` and the entries of an experience snapshot
taken from another lineage (:func:`check_contract`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mindforge.errors import InputError


def pool_solutions(task_paths: Iterable[Path], curriculum: Any = None) -> dict[str, str]:
    """Task id -> reference solution of every task the pool may hold.

    Args:
        task_paths: task folders or folders of them (``--tasks``, ``--sealed-tasks``).
        curriculum: a :class:`mindforge.payloads.CurriculumSpec` or None; each of its
            families (held-out ones too) counts with the solution of its ``[example]``
            instance, named ``family <name>`` (a family's instances share their commands'
            programs and options).
    """
    from mindforge.search.restates import folder_solutions

    out: dict[str, str] = {}
    for path in task_paths:
        out.update(folder_solutions(Path(path).resolve()))
    if curriculum is not None:
        from mindforge.discovery.families import load_families

        families = load_families(Path(curriculum.families_dir))
        for name in curriculum.families:
            family = families[name]
            out[f"family {name}"] = family.render(family.example).solve_sh
    return out


def check_examples(folder: Path, examples: list, solutions: dict[str, str]) -> None:
    """Raise when an example restates a pool task's reference solution.

    Raises:
        InputError: naming the example's file, its ``steps`` and (up to three of) the tasks.
    """
    from mindforge.search.restates import restatements

    for name, tasks in sorted(restatements(examples, solutions).items()):
        shown = ", ".join(tasks[:3]) + (f" and {len(tasks) - 3} more" if len(tasks) > 3 else "")
        raise InputError(
            folder / f"{name}.toml", "steps",
            f"shares program and options with the reference solution of pool task(s) {shown}; any pool task can be "
            "a selection or sealed task, so this example would carry its answer into the decisions and the sealed "
            "figure: drop the example or the task",
        )


def check_contract(path: Path, contract: Any, solutions_of: Any) -> None:
    """Raise when the root contract's worked examples or library entries restate a pool task.

    Args:
        path: the contract file (named in the error).
        contract: the loaded :class:`mindforge.hcp.HCPContract`.
        solutions_of: ``() -> {task id: solution}``, called only when the contract carries
            examples or a snapshot (:func:`pool_solutions`).

    Raises:
        InputError: naming the contract file, ``resources.examples[i]`` or the snapshot's
            entry, and (up to three of) the tasks.
    """
    from mindforge.experience.contract import contract_snapshot
    from mindforge.search.restates import restated_commands

    snapshot = contract_snapshot(contract)
    examples = contract.resources.examples
    named = {f"resources.examples[{i}]": [s.command for s in e.steps] for i, e in enumerate(examples)}
    if snapshot is not None:
        named |= {f"resources.experience: entry {e.entry_id} (task {e.task_id})": e.commands for e in snapshot.entries}
    if not named:
        return
    for where, tasks in sorted(restated_commands(named, solutions_of()).items()):
        shown = ", ".join(tasks[:3]) + (f" and {len(tasks) - 3} more" if len(tasks) > 3 else "")
        raise InputError(
            path, where,
            f"shares program and options with the reference solution of pool task(s) {shown}; any pool task can be a "
            "selection or sealed task, so the root contract would carry its answer: start from a contract without it",
        )


def checked_seeds(contract_path: Path, contract: Any, examples: Path | None, task_paths: list, curriculum: Any) -> list:
    """The user's ``--examples`` (none when None), after both checks against the pool.

    Raises:
        InputError: a bad example file (:func:`mindforge.search.library.load_example_folder`),
            or an example or the root contract restating a pool task (:func:`check_examples`,
            :func:`check_contract`).
    """
    from mindforge.search.library import load_example_folder

    def solutions() -> dict[str, str]:
        return pool_solutions(task_paths, curriculum)

    check_contract(contract_path, contract, solutions)
    if examples is None:
        return []
    seeded = load_example_folder(Path(examples))
    check_examples(Path(examples), seeded, solutions())
    return seeded
