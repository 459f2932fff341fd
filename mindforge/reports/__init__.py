"""Lineage reports (``mindforge report``): coverage curve, single vs adaptive, audits, spend, lineage.

``gather_report_data(session, lineage)`` collects everything from the store;
``render_report(data, fmt)`` writes it as ``html`` (one self-contained file, plots as
data URIs), ``md`` or ``json``.
"""

from __future__ import annotations

from mindforge.reports.data import ReportData, gather_report_data
from mindforge.reports.html import render_html
from mindforge.reports.markdown import render_markdown
from mindforge.reports.sections import SECTION_IDS

FORMATS = ("html", "md", "json")


def render_report(data: ReportData, fmt: str) -> str:
    """The report in one format.

    Args:
        data: from :func:`gather_report_data`.
        fmt: ``html``, ``md`` or ``json``.

    Raises:
        ValueError: an unknown format.
    """
    if fmt == "html":
        return render_html(data)
    if fmt == "md":
        return render_markdown(data)
    if fmt == "json":
        return data.model_dump_json(indent=2) + "\n"
    raise ValueError(f"unknown report format {fmt!r}; use one of {', '.join(FORMATS)}")


__all__ = [
    "FORMATS",
    "SECTION_IDS",
    "ReportData",
    "gather_report_data",
    "render_html",
    "render_markdown",
    "render_report",
]
