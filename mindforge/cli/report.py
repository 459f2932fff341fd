"""``mindforge report LINEAGE``: a lineage's coverage, audits, spend and contract lineage.

The report is written as HTML, Markdown or JSON. A section that fails to render is shown
in the report as an error in its place; the command then names it on stderr and exits
:data:`REPORT_INCOMPLETE_EXIT` (``mindforge quickstart`` does the same).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import BaseModel, Field

from mindforge.cli.output import make_console
from mindforge.errors import InputError

if TYPE_CHECKING:
    from mindforge.reports import RenderedReport

#: exit status when the report was written but a section of it failed to render
REPORT_INCOMPLETE_EXIT = 3


class WrittenReport(BaseModel):
    """A report written to a file.

    Attributes:
        path: the file.
        failed: section id -> ``"ExceptionType: message"`` of the sections that failed to
            render (shown in the file as errors); empty when the report is complete.
    """

    path: Path
    failed: dict[str, str] = Field(default_factory=dict)


def incomplete_lines(where: str, failed: dict[str, str]) -> list[str]:
    """One line per section that failed to render in the report ``where`` (none when it is complete)."""
    return [f"report {where} is incomplete: section {sid} failed to render ({error})" for sid, error in failed.items()]


def report_command(
    lineage: Annotated[str, typer.Argument(help="Lineage name or id.")],
    format: Annotated[str, typer.Option("--format", "-f", help="html, md or json.")] = "html",  # noqa: A002 - Typer names the option after it
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Output file; default: html under the artifact root, md/json to stdout."),
    ] = None,
) -> None:
    """Write a lineage report: splits, search-set coverage, selection decisions, sealed lift, audits, spend.

    Exit status 0 when the report is complete; 3 when it was written but a section failed
    to render (the report shows the error in that section's place, the other sections are
    complete, and stderr names each failed section); 2 for an unknown format or lineage.

    Raises:
        InputError: an unknown format or lineage (printed as one line by ``mindforge``).
        typer.Exit: with :data:`REPORT_INCOMPLETE_EXIT`, after writing an incomplete report.
    """
    err = make_console(stderr=True)
    if out is None and format != "html":
        rendered = render_lineage_report(lineage, format)
        typer.echo(rendered.text, nl=False)
        failed, where = rendered.failed, f"of {lineage}"
    else:
        written = write_report(lineage, format, out)
        err.print(f"report written to {written.path}", highlight=False)
        failed, where = written.failed, str(written.path)
    for line in incomplete_lines(where, failed):
        err.print(f"warning: {line}", highlight=False)
    if failed:
        raise typer.Exit(REPORT_INCOMPLETE_EXIT)


def render_lineage_report(lineage: str, fmt: str) -> RenderedReport:
    """A lineage's report (``html``, ``md`` or ``json``) from the settings' store, with the sections that failed.

    Raises:
        InputError: an unknown format or lineage.
    """
    from mindforge.reports import FORMATS, gather_report_data, render_checked
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
    return render_checked(data, fmt)


def write_report(lineage: str, fmt: str = "html", out: Path | None = None) -> WrittenReport:
    """Write a lineage's report to ``out`` (default ``<artifacts>/reports/<lineage>.<fmt>``).

    Returns:
        the path written and the sections that failed to render in it (written anyway,
        each shown as an error in its place).

    Raises:
        InputError: an unknown format or lineage.
    """
    from mindforge.settings import get_settings

    rendered = render_lineage_report(lineage, fmt)
    path = out or get_settings().artifacts / "reports" / f"{lineage}.{fmt}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(rendered.text, encoding="utf-8")
    return WrittenReport(path=path, failed=rendered.failed)
