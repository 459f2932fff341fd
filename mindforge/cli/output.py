"""Output of the CLI: tables fit a terminal, links and paths never break across lines, ``--json`` is one document.

Into a file or a pipe the output is plain lines: no spinner, no redrawn progress bar
(:func:`status_line`, :func:`quiet_progress_bars`), so a redirected log reads top to bottom.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

#: table width when the output is a file or a pipe (Rich would assume 80 columns there)
PIPE_WIDTH = 200
#: help of ``--examples`` (lineage start, quickstart, schedule create): one wording everywhere
EXAMPLES_HELP = (
    "Folder of your own worked-example TOML files (instruction + \\[\\[steps]]) that configuration search may add "
    "to contracts; none by default. Examples written from the evaluated tasks void the sealed figure."
)
#: help of ``--guidance`` (lineage start, quickstart): one wording everywhere
GUIDANCE_HELP = (
    "Update: off-policy guidance - a group of a search task whose rollouts all failed is joined by the task's own "
    "validated experience entry, rendered under the training contract (LUFFY's mixed-policy GRPO)"
)


def make_console(*, stderr: bool = False) -> Console:
    """A Rich console for stdout (or stderr).

    On a terminal, tables fit its width; into a file or pipe, they get
    :data:`PIPE_WIDTH` columns, so task ids and failure classes stay whole. Text lines
    never wrap (``soft_wrap``), so a Web UI link or a report path can be copied.
    """
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else PIPE_WIDTH, soft_wrap=True)


def print_json(document: object) -> None:
    """Print one JSON document on stdout (the ``--json`` form of a listing or status command).

    Nothing else goes to stdout, no Rich markup or wrapping is applied: a script reads
    the whole output with one ``json.loads``. Values JSON has no type for (datetimes,
    paths, enums) are written as their text.
    """
    import json

    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


#: environment variables that switch off the progress bars libraries draw on stderr: tqdm's
#: (transformers converting a GGUF file, loading weights) and the Hugging Face hub's downloads
PROGRESS_BAR_SWITCHES = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


def quiet_progress_bars() -> bool:
    """Switch libraries' progress bars off when stdout or stderr is not a terminal.

    A redirected log then holds plain lines, not carriage-return redraws. The variables
    (:data:`PROGRESS_BAR_SWITCHES`) are set in this process's environment, so the worker
    and policy server it starts inherit them; a value already set is kept.

    Returns:
        True when the bars were switched off (some stream is not a terminal).
    """
    if sys.stdout.isatty() and sys.stderr.isatty():
        return False
    for name, value in PROGRESS_BAR_SWITCHES.items():
        os.environ.setdefault(name, value)
    return True


@contextmanager
def status_line(console: Console, text: str, *, enabled: bool = True) -> Iterator[Callable[[str], None]]:
    """A status that changes while a command waits.

    On a terminal: a spinner, the text and the elapsed time, redrawn in place. Into a file
    or a pipe: a plain line each time the text changes, ending with the seconds elapsed
    (``lineage-x: running generation 1 (of 3, first is 0) (35 s)``); no spinner glyph.

    Args:
        console: where it goes (:func:`make_console`).
        text: the first status.
        enabled: False shows nothing.

    Yields:
        A function that sets the status text.
    """
    if not enabled:
        yield lambda _text: None
        return
    if console.is_terminal:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console) as bar:
            task = bar.add_task(text)
            yield lambda new: bar.update(task, description=new)
        return
    started = time.monotonic()
    shown: list[str] = []

    def update(new: str) -> None:
        if not shown or shown[-1] != new:
            shown.append(new)
            console.print(f"{new} ({time.monotonic() - started:.0f} s)", markup=False, highlight=False)

    update(text)
    yield update
