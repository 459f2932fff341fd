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

#: the ``--engine`` help of every command that serves a model in-process (quickstart, eval)
ENGINE_HELP = (
    "Generation engine of the embedded server: 'llamacpp' (a GGUF model on llama.cpp, the main job's engine), "
    "'transformers', or 'auto' (llamacpp for a GGUF model when llama-cpp-python is installed, else transformers)."
)

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
    """A Rich progress bar for trial batches on stderr (disabled, or stderr not a terminal: prints nothing)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not enabled or not console.is_terminal,
    )


def choose_engine(choice: str, resolved) -> str:
    """The embedded server's engine: ``auto`` picks llama.cpp for a GGUF model when it is installed.

    One rule for ``quickstart`` and ``eval``, so ``eval --model smollm2`` generates on the
    engine the main job uses (llama.cpp: several times faster than transformers on CPU).

    Args:
        choice: ``auto``, ``llamacpp`` or ``transformers`` (the ``--engine`` option).
        resolved: the model (:class:`mindforge.policy.engines.models.ResolvedModel`).

    Returns:
        ``llamacpp`` or ``transformers``.

    Raises:
        InputError: an unknown choice, or ``llamacpp`` for a model without a GGUF file or
            without the ``llamacpp`` extra installed.
    """
    import importlib.util

    have_llamacpp = importlib.util.find_spec("llama_cpp") is not None
    if choice == "auto":
        return "llamacpp" if resolved.gguf_path and have_llamacpp else "transformers"
    if choice not in ("llamacpp", "transformers"):
        raise InputError("--engine", "engine", f"unknown engine {choice!r}; choose auto, llamacpp or transformers")
    if choice == "llamacpp" and not resolved.gguf_path:
        raise InputError("--engine", "engine", f"llamacpp serves a GGUF file; --model {resolved.spec!r} has none")
    if choice == "llamacpp" and not have_llamacpp:
        raise InputError("--engine", "engine", "llama-cpp-python is not installed: pip install -e '.[llamacpp]'")
    return choice
