"""Lineage reports (``mindforge report``): coverage curve, single vs adaptive, audits, spend, lineage.

``gather_report_data(session, lineage)`` collects everything from the store;
``render_report(data, fmt)`` writes it as ``html`` (one self-contained file, plots as
data URIs), ``md`` or ``json``; ``render_checked(data, fmt)`` also says which sections
failed to render (each is shown in the report as an error in its place).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from mindforge.reports.data import ReportData, gather_report_data
from mindforge.reports.html import render_html
from mindforge.reports.markdown import render_markdown
from mindforge.reports.sections import SECTION_IDS, build_sections, failed_sections

FORMATS = ("html", "md", "json")


class RenderedReport(BaseModel):
    """A rendered report and the sections that failed to render in it.

    Attributes:
        text: the report in its format.
        failed: section id -> ``"ExceptionType: message"``, in report order; empty when the
            report is complete (always, for ``json``, which has no sections).
    """

    text: str
    failed: dict[str, str] = Field(default_factory=dict)


def render_checked(data: ReportData, fmt: str) -> RenderedReport:
    """The report in one format, with the sections that failed to render.

    Args:
        data: from :func:`gather_report_data`.
        fmt: ``html``, ``md`` or ``json``.

    Raises:
        ValueError: an unknown format.
    """
    if fmt == "json":
        return RenderedReport(text=data.model_dump_json(indent=2) + "\n")
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r}; use one of {', '.join(FORMATS)}")
    sections = build_sections(data, with_plots=fmt == "html")
    text = render_html(data, sections) if fmt == "html" else render_markdown(data, sections)
    return RenderedReport(text=text, failed=failed_sections(sections))


def render_report(data: ReportData, fmt: str) -> str:
    """The report in one format (see :func:`render_checked` for the sections that failed to render).

    Args:
        data: from :func:`gather_report_data`.
        fmt: ``html``, ``md`` or ``json``.

    Raises:
        ValueError: an unknown format.
    """
    return render_checked(data, fmt).text


__all__ = [
    "FORMATS",
    "SECTION_IDS",
    "RenderedReport",
    "ReportData",
    "gather_report_data",
    "render_checked",
    "render_html",
    "render_markdown",
    "render_report",
]
