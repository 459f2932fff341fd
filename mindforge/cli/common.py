"""Helpers the task commands share (``tasks validate|run``, ``tasks discover``): load task folders, show progress."""

from __future__ import annotations

from pathlib import Path

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from mindforge.cli.output import make_console
from mindforge.errors import InputError

console = make_console(stderr=True)  # progress goes to stderr, tables to stdout


def load_task_dirs(paths: list[Path]):
    """Load every task under ``paths``; returns ``(tasks, [(dir, InputError), ...])``.

    Raises:
        InputError: a path does not exist, or no task directory is found.
    """
    from mindforge.tasks.loader import find_task_dirs, load_task

    dirs: list[Path] = []
    for p in paths:
        if not p.exists():
            raise InputError(p, "", "no such file or directory")
        dirs.extend(find_task_dirs(p))
    if not dirs:
        raise InputError(", ".join(map(str, paths)), "", "no task directories (with task.toml) found")
    loaded, errors = [], []
    for d in dirs:
        try:
            loaded.append(load_task(d))
        except InputError as exc:
            errors.append((d, exc))
    return loaded, errors


def task_progress(enabled: bool) -> Progress:
    """A Rich progress bar for trial batches (disabled: prints nothing)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not enabled,
    )
