"""The Markdown report: the same sections and numbers as the HTML one, without plots."""

from __future__ import annotations

from mindforge.reports.data import ReportData
from mindforge.reports.sections import Block, Section, build_sections


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _block(block: Block) -> str:
    if block.kind == "text":
        return block.text
    if block.kind == "pre":
        return f"```\n{block.text}\n```"
    if block.kind == "image":
        return ""
    if block.kind == "error":
        return f"> **Error:** {_escape(block.text)}"
    assert block.table is not None
    lines = ["| " + " | ".join(_escape(h) for h in block.table.header) + " |"]
    lines.append("|" + "---|" * len(block.table.header))
    lines += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in block.table.rows]
    return "\n".join(lines)


def render_markdown(data: ReportData, sections: list[Section] | None = None) -> str:
    """The whole report as Markdown text; each section starts with an anchor of its id.

    Args:
        data: the gathered report data.
        sections: the sections, already built without plots (default: built here).
    """
    out = []
    for index, section in enumerate(build_sections(data, with_plots=False) if sections is None else sections):
        heading = "#" if index == 0 else "##"
        out.append(f'<a id="{section.id}"></a>\n\n{heading} {section.title}')
        out += [text for block in section.blocks if (text := _block(block))]
    return "\n\n".join(out) + "\n"
