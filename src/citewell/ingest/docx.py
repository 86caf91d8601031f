"""Word documents (DOCX) read with python-docx, after checking the ZIP package is safe to open.

The body is walked in document order, paragraphs and tables interleaved (content controls are
looked into). Headings come from the paragraph style: "Title" is level 1 and "Heading N" is level
N + 1, so a document's title stays the parent of its sections (this is also how docling numbers
them); a paragraph with an outline level but no heading style counts as that heading. List items
are paragraphs with numbering (``w:numPr``, directly or through their style) or a "List ..."
style. A table's first row is its header. Whitespace inside a paragraph collapses to one space.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from typing import Any

import docx
from docx.oxml.ns import qn
from docx.table import Table
from docx.text.paragraph import Paragraph

from citewell.config import IngestSettings
from citewell.errors import ParseError
from citewell.ingest.base import BlockKind, DocumentBuilder, ParsedDocument
from citewell.ingest.limits import check_limit
from citewell.ingest.tables import collapse, format_row

__all__ = ["PARSER", "DocxParser", "check_package"]

MAIN_PART = "word/document.xml"
# A member that inflates more than this many times, to more than BOMB_MIN_BYTES, is refused:
# real Office XML compresses about 5-20 times; zip bombs compress hundreds to millions of times.
BOMB_RATIO = 200
BOMB_MIN_BYTES = 10 * 1024 * 1024

_HEADING_STYLE = re.compile(r"heading\s*([1-9])$", re.IGNORECASE)
_STYLE_DEPTH = 10  # how far up the based-on chain of styles to look for numbering

Element = Any  # python-docx's lxml elements carry no type information


def check_package(data: bytes, *, filename: str, limits: IngestSettings) -> None:
    """Refuse what is not a ZIP, would unpack too large, looks like a zip bomb, or has no body.

    Uses only the sizes the ZIP directory declares; Python's zipfile stops inflating a member at
    its declared size, so a member cannot lie its way past these checks later.
    """
    try:
        package = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise ParseError(
            f"{filename} is not a Word document: it is not a ZIP package", filename=filename
        ) from None
    with package:
        members = package.infolist()
        check_limit(
            sum(member.file_size for member in members),
            limits.max_unpacked_bytes,
            what="bytes when unpacked",
            setting="max_unpacked_bytes",
            filename=filename,
        )
        for member in members:
            ratio = member.file_size / max(member.compress_size, 1)
            if ratio > BOMB_RATIO and member.file_size > BOMB_MIN_BYTES:
                raise ParseError(
                    f"{filename} looks like a zip bomb: {member.filename} inflates "
                    f"{ratio:,.0f}-fold to {member.file_size:,} bytes",
                    filename=filename,
                )
        if MAIN_PART not in {member.filename for member in members}:
            raise ParseError(
                f"{filename} is not a Word document: it has no {MAIN_PART}", filename=filename
            )


def _body_items(container: Element, parent: Any) -> Iterator[Paragraph | Table]:
    """Paragraphs and tables of the body in document order, looking into content controls."""
    for child in container.iterchildren():
        if child.tag == qn("w:p"):
            yield Paragraph(child, parent)
        elif child.tag == qn("w:tbl"):
            yield Table(child, parent)
        elif child.tag == qn("w:sdt"):
            content = child.find(qn("w:sdtContent"))
            if content is not None:
                yield from _body_items(content, parent)


def _style_name(paragraph: Paragraph) -> str:
    style = paragraph.style
    return (style.name or "") if style is not None else ""


def heading_level(paragraph: Paragraph) -> int | None:
    """Level of a heading paragraph (Title = 1, Heading N = N + 1), or None."""
    name = _style_name(paragraph).strip()
    if name.lower() == "title":
        return 1
    match = _HEADING_STYLE.match(name)
    if match:
        return int(match.group(1)) + 1
    ppr = paragraph._p.pPr
    outline = ppr.find(qn("w:outlineLvl")) if ppr is not None else None
    if outline is not None:
        value = outline.get(qn("w:val"), "")
        # Level 9 means "body text" in Word.
        if value.isdigit() and int(value) < 9:
            return int(value) + 2
    return None


def _num_id(ppr: Element | None) -> str | None:
    """The numbering id a ``w:pPr`` sets, if it sets one (``w:numPr`` may hold only a level)."""
    num_pr = ppr.find(qn("w:numPr")) if ppr is not None else None
    num_id = num_pr.find(qn("w:numId")) if num_pr is not None else None
    return num_id.get(qn("w:val")) if num_id is not None else None


def is_list_item(paragraph: Paragraph) -> bool:
    """Numbered or bulleted: numbering on the paragraph or its styles, or a "List" style.

    The nearest numbering id wins; id 0 switches numbering off.
    """
    if _style_name(paragraph).lower().startswith("list"):
        return True
    num_id = _num_id(paragraph._p.pPr)
    style = paragraph.style
    for _ in range(_STYLE_DEPTH):
        if num_id is not None or style is None:
            break
        num_id = _num_id(style.element.pPr)
        style = style.base_style
    return num_id not in (None, "0")


def _add_paragraph(builder: DocumentBuilder, paragraph: Paragraph) -> None:
    text = collapse(paragraph.text)
    level = heading_level(paragraph)
    if level is not None:
        builder.add_block(BlockKind.HEADING, text, level=level)
        if level == 1 and builder.title is None and text:
            builder.title = text
    elif is_list_item(paragraph):
        builder.add_block(BlockKind.LIST_ITEM, text)
    else:
        builder.add_block(BlockKind.PARAGRAPH, text)


def table_rows(table: Table) -> Iterator[list[str]]:
    """Cell texts row by row; a merged cell counts once (python-docx repeats it per column)."""
    for row in table.rows:
        cells: list[str] = []
        previous = None
        for cell in row.cells:
            cells.append("" if cell._tc is previous else collapse(cell.text))
            previous = cell._tc
        yield cells


def _add_table(builder: DocumentBuilder, table: Table) -> None:
    rows = list(table_rows(table))
    header, body = (rows[0], rows[1:]) if len(rows) > 1 else ([], rows)
    for cells in body:
        builder.add_block(BlockKind.TABLE_ROW, format_row(header, cells))


class DocxParser:
    media_types: tuple[str, ...] = (
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    )

    def parse(self, data: bytes, *, filename: str, limits: IngestSettings) -> ParsedDocument:
        check_package(data, filename=filename, limits=limits)
        document = docx.Document(io.BytesIO(data))
        builder = DocumentBuilder()
        for item in _body_items(document.element.body, document._body):
            if isinstance(item, Paragraph):
                _add_paragraph(builder, item)
            else:
                _add_table(builder, item)
        core_title = collapse(document.core_properties.title or "")
        builder.title = core_title or builder.title
        return builder.build()


PARSER = DocxParser()
