"""The report's renderer-neutral content: a section of paragraphs, tables, preformatted text, images and errors.

HTML (:mod:`mindforge.reports.html`) and Markdown (:mod:`mindforge.reports.markdown`)
render the same :class:`Section` list; the section builders live in
:mod:`mindforge.reports.sections` and :mod:`mindforge.reports.reading_sections`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Table(BaseModel):
    """A table: a header row and body rows of text cells."""

    header: list[str]
    rows: list[list[str]]


class Block(BaseModel):
    """One piece of a section: a paragraph, a table, a preformatted text, an image (data URI) or an error."""

    kind: str  # "text" | "table" | "pre" | "image" | "error"
    text: str = ""
    table: Table | None = None
    alt: str = ""


class Section(BaseModel):
    """A titled section with a stable id.

    Attributes:
        error: ``"ExceptionType: message"`` when the section failed to render ("" when it rendered).
    """

    id: str
    title: str
    blocks: list[Block] = Field(default_factory=list)
    error: str = ""

    def text(self, text: str) -> Section:
        """Append a paragraph; returns the section."""
        self.blocks.append(Block(kind="text", text=text))
        return self

    def table(self, header: list[str], rows: list[list[Any]]) -> Section:
        """Append a table (cells turned into text); returns the section."""
        self.blocks.append(Block(kind="table", table=Table(header=header, rows=[[str(c) for c in r] for r in rows])))
        return self

    def pre(self, text: str) -> Section:
        """Append preformatted text (a diff); returns the section."""
        self.blocks.append(Block(kind="pre", text=text))
        return self

    def image(self, uri: str, alt: str) -> Section:
        """Append an image (a data URI) with its alt text; returns the section."""
        self.blocks.append(Block(kind="image", text=uri, alt=alt))
        return self
