"""``mindforge report LINEAGE``: a lineage's coverage, audits, spend and contract lineage.

The report is written as HTML, Markdown or JSON.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mindforge.cli.output import make_console
from mindforge.errors import InputError


def report_command(
    lineage: Annotated[str, typer.Argument(help="Lineage name or id.")],
    format: Annotated[str, typer.Option("--format", "-f", help="html, md or json.")] = "html",  # noqa: A002 - Typer names the option after it
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Output file; default: html under the artifact root, md/json to stdout."),
    ] = None,
) -> None:
    """Write a lineage report: splits, search-set coverage, selection decisions, sealed lift, audits, spend.

    Raises:
        InputError: an unknown format or lineage (printed as one line by ``mindforge``).
    """
    if out is None and format != "html":
        typer.echo(render_lineage_report(lineage, format), nl=False)
        return
    path = write_report(lineage, format, out)
    make_console(stderr=True).print(f"report written to {path}", highlight=False)


def render_lineage_report(lineage: str, fmt: str) -> str:
    """A lineage's report as text (``html``, ``md`` or ``json``), from the settings' store.

    Raises:
        InputError: an unknown format or lineage.
    """
    from mindforge.reports import FORMATS, gather_report_data, render_report
    from mindforge.settings import get_settings
    from mindforge.store import init_db, session_scope
    from mindforge.store.errors import NotFoundError

    if fmt not in FORMATS:
        raise InputError("--format", "format", f"{fmt!r} is not one of {', '.join(FORMATS)}")
    settings = get_settings()
    engine = init_db(settings.db_url)
    try:
        with session_scope(engine) as session:
            data = gather_report_data(session, lineage)
    except NotFoundError:
        raise InputError(settings.db_url, "LINEAGE", f"no lineage named or with id {lineage!r}") from None
    finally:
        engine.dispose()
    return render_report(data, fmt)


def write_report(lineage: str, fmt: str = "html", out: Path | None = None) -> Path:
    """Write a lineage's report to ``out`` (default ``<artifacts>/reports/<lineage>.<fmt>``); returns the path.

    Raises:
        InputError: an unknown format or lineage.
    """
    from mindforge.settings import get_settings

    text = render_lineage_report(lineage, fmt)
    path = out or get_settings().artifacts / "reports" / f"{lineage}.{fmt}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
