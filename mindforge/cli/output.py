"""Output of the CLI: tables fit a terminal, links and paths never break across lines, ``--json`` is one document."""

from __future__ import annotations

import sys

from rich.console import Console

#: table width when the output is a file or a pipe (Rich would assume 80 columns there)
PIPE_WIDTH = 200
#: help of ``--examples`` (lineage start, quickstart, schedule create): one wording everywhere
EXAMPLES_HELP = (
    "Folder of your own worked-example TOML files (instruction + [[steps]]) that configuration search may add "
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
