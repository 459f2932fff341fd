"""``mindforge report LINEAGE``: the lineage's coverage, audits, spend and contract lineage as HTML, Markdown or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mindforge.cli.output import make_console
from mindforge.errors import InputError


def report_command(
    lineage: Annotated[str, typer.Argument(help="Lineage name or id.")],
    format: Annotated[str, typer.Option("--format", "-f", help="html, md or json.")] = "html",  # noqa: A002
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Output file; default: html under the artifact root, md/json to stdout."),
    ] = None,
) -> None:
    """Write a lineage report: coverage curve, best single contract vs adaptive search, audits, spend, lineage.

    Raises:
        InputError: an unknown format or lineage (printed as one line by ``mindforge``).
    """
    from mindforge.reports import FORMATS, gather_report_data, render_report
    from mindforge.settings import get_settings
    from mindforge.store import init_db, session_scope
    from mindforge.store.errors import NotFoundError

    if format not in FORMATS:
        raise InputError("--format", "format", f"{format!r} is not one of {', '.join(FORMATS)}")
    settings = get_settings()
    engine = init_db(settings.db_url)
    try:
        with session_scope(engine) as session:
            data = gather_report_data(session, lineage)
    except NotFoundError:
        raise InputError(settings.db_url, "LINEAGE", f"no lineage named or with id {lineage!r}") from None
    finally:
        engine.dispose()
    text = render_report(data, format)
    if out is None and format != "html":
        typer.echo(text, nl=False)
        return
    path = out or settings.artifacts / "reports" / f"{data.lineage_name}.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    make_console(stderr=True).print(f"report written to {path}", highlight=False)
