"""The HTML report: one self-contained file (inline CSS, plots as PNG data URIs), no server needed."""

from __future__ import annotations

import html

from mindforge.reports.data import ReportData
from mindforge.reports.sections import Block, Section, build_sections

_CSS = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1200px;
       color: #222; padding: 0 1em; }
h1 { border-bottom: 2px solid #444; padding-bottom: .2em; }
h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
table { border-collapse: collapse; margin: .8em 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.hit { background: #d8f0d8; }
pre { background: #f7f7f7; border: 1px solid #e0e0e0; padding: .6em; overflow-x: auto; font-size: 12px; }
img { max-width: 100%; border: 1px solid #eee; margin: .5em 0; }
nav a { margin-right: 1em; }
.error { background: #fdecea; border: 1px solid #d62728; color: #8b1a1a; padding: .6em; font-weight: bold; }
"""


def _cell(value: str, tag: str) -> str:
    hit = tag == "td" and "/" in value and value.split("/")[0].isdigit() and int(value.split("/")[0]) > 0
    attrs = ' class="hit"' if hit else ""
    return f"<{tag}{attrs}>{html.escape(value)}</{tag}>"


def _block(block: Block) -> str:
    if block.kind == "text":
        return f"<p>{html.escape(block.text)}</p>"
    if block.kind == "pre":
        return f"<pre>{html.escape(block.text)}</pre>"
    if block.kind == "image":
        return f'<img src="{block.text}" alt="{html.escape(block.alt)}">'
    if block.kind == "error":
        return f'<p class="error" role="alert">{html.escape(block.text)}</p>'
    assert block.table is not None
    head = "".join(_cell(h, "th") for h in block.table.header)
    body = "".join("<tr>" + "".join(_cell(c, "td") for c in row) + "</tr>" for row in block.table.rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _section(section: Section, level: int) -> str:
    inner = "\n".join(_block(b) for b in section.blocks)
    return f'<section id="{section.id}">\n<h{level}>{html.escape(section.title)}</h{level}>\n{inner}\n</section>'


def render_html(data: ReportData, sections: list[Section] | None = None) -> str:
    """The whole report as an HTML document (UTF-8 text).

    Args:
        data: the gathered report data.
        sections: the sections, already built with plots (default: built here).
    """
    sections = build_sections(data, with_plots=True) if sections is None else sections
    nav = " ".join(f'<a href="#{s.id}">{html.escape(s.title)}</a>' for s in sections[1:])
    body = "\n".join(_section(s, 1 if i == 0 else 2) for i, s in enumerate(sections))
    title = html.escape(f"MindForge report: {data.lineage_name}")
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{title}</title>\n'
        f"<style>{_CSS}</style>\n</head>\n<body>\n<nav>{nav}</nav>\n{body}\n</body>\n</html>\n"
    )
