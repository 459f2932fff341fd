"""``--help`` text from docstrings: the usage part only, without the Google-style sections.

Typer shows a command function's docstring as its help. The docstrings follow the house
style (Google style, with ``Args:``, ``Returns:``, ``Raises:`` ...), written for code
readers; a user running ``mindforge report --help`` wants what the command does, not
which exception types it raises. :func:`use_usage_help` gives every command of an app an
explicit help text: its docstring with those sections left out.
"""

from __future__ import annotations

import inspect
import re

import typer

#: Google-style section headers (https://google.github.io/styleguide/pyguide.html#383-functions-and-methods)
SECTION_HEADERS = (
    "Args", "Arguments", "Attributes", "Example", "Examples", "Keyword Args", "Keyword Arguments", "Note", "Notes",
    "Raises", "Returns", "Return", "See Also", "Todo", "Warning", "Warnings", "Yields", "Yield",
)
_HEADER_RE = re.compile(rf"^(?:{'|'.join(re.escape(h) for h in SECTION_HEADERS)}):\s*$")


def usage_text(doc: str | None) -> str:
    """A docstring without its Google-style sections.

    A section is its header line (``Raises:`` alone on a line) and the indented or blank
    lines under it; the text before, between and after sections is kept.

    Args:
        doc: a docstring, or None.

    Returns:
        the usage text, dedented, without trailing blank lines ("" for None).
    """
    kept: list[str] = []
    in_section = False
    for line in inspect.cleandoc(doc or "").splitlines():
        if _HEADER_RE.match(line):
            in_section = True
            continue
        if in_section and (not line.strip() or line[:1].isspace()):
            continue
        in_section = False
        kept.append(line)
    return "\n".join(kept).strip()


def use_usage_help(app: typer.Typer) -> None:
    """Give every command of ``app`` and of its sub-apps, recursively, its usage text as help.

    Commands whose help was set explicitly (``help=``) keep it.
    """
    for command in app.registered_commands:
        if command.help is None and command.callback is not None:
            command.help = usage_text(command.callback.__doc__)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            use_usage_help(group.typer_instance)
