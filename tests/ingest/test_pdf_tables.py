"""PDF tables: each body row of a ruled table is one block that names its columns."""

from __future__ import annotations

import hashlib
import io
import math
import re
from pathlib import Path

import numpy as np
import pypdfium2
import pypdfium2.raw as pdfium_c
import pytest
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.platypus import Flowable, Paragraph, SimpleDocTemplate, Table, TableStyle

from citewell.config import IngestSettings, Settings
from citewell.ingest import parse
from citewell.ingest.base import BlockKind, ParsedDocument
from citewell.ingest.tables import format_row
from citewell.library import Library
from citewell.model import RetrievalMode, SearchRequest

BEFORE = "Every plan is billed monthly and can be cancelled at any time."
AFTER = "Prices include value added tax where it applies."
CELLS = [
    ["Plan", "Price", "Seats"],
    ["Basic", "10 €", "1"],
    ["Team", "45 €", "5"],
    ["Enterprise plan", "1,200 €", "250"],
]
ROWS = [
    "Plan: Basic; Price: 10 €; Seats: 1",
    "Plan: Team; Price: 45 €; Seats: 5",
    "Plan: Enterprise plan; Price: 1,200 €; Seats: 250",
]
# The canonical texts of these PDFs before tables were looked for: no table may appear in them.
WITHOUT_TABLES = {
    "multi_page": "6c16cc2c38dea03d9dd63b4938a302f95891c7eb9ab9fe7ea3124a8d3920bba9",
    "amt_handbook_sample": "7b6398536ea721bc9fe2de3b167e120f5f81f5b68ca92ab9765edd756332d934",
}


def _table(cells: list[list[str]], style: str = "GRID") -> Table:
    table = Table(cells)
    table.setStyle(TableStyle([(style, (0, 0), (-1, -1), 0.5, colors.black)]))
    return table


def _pdf(*flowables: Flowable) -> bytes:
    """A PDF written by reportlab: a heading, a paragraph, the flowables, a paragraph."""
    styles = getSampleStyleSheet()
    buffer = io.BytesIO()
    story = [
        Paragraph("Pricing", styles["Heading1"]),
        Paragraph(BEFORE, styles["Normal"]),
        *flowables,
        Paragraph(AFTER, styles["Normal"]),
    ]
    SimpleDocTemplate(buffer, pagesize=A4).build(story)
    return buffer.getvalue()


def _parse(data: bytes) -> ParsedDocument:
    return parse(data, filename="pricing.pdf", limits=IngestSettings())


def _blocks(document: ParsedDocument) -> list[tuple[BlockKind, str]]:
    return [(b.kind, document.text[b.span.start : b.span.end]) for b in document.blocks]


@pytest.fixture(scope="module")
def pricing() -> bytes:
    return _pdf(_table(CELLS))


def test_each_body_row_is_a_block_naming_its_columns_between_the_paragraphs(
    pricing: bytes,
) -> None:
    assert _blocks(_parse(pricing)) == [
        (BlockKind.HEADING, "Pricing"),
        (BlockKind.PARAGRAPH, BEFORE),
        *[(BlockKind.TABLE_ROW, row) for row in ROWS],
        (BlockKind.PARAGRAPH, AFTER),
    ]


def test_no_cell_text_is_left_in_the_prose(pricing: bytes) -> None:
    document = _parse(pricing)
    prose = " ".join(text for kind, text in _blocks(document) if kind is not BlockKind.TABLE_ROW)
    for value in ("Basic", "10", "45", "Enterprise", "1,200", "250", "€", "Seats"):
        assert value not in prose
    for value in ("Basic", "Team", "Enterprise plan", "1,200 €", "250"):
        assert document.text.count(value) == 1


def _pdfium_glyphs(data: bytes) -> list[tuple[str, tuple[float, ...]]]:
    """The characters PDFium has a glyph for on page 1, with their boxes in top-left origin."""
    pdf = pypdfium2.PdfDocument(data)
    page = pdf[0]
    height = page.get_height()
    textpage = page.get_textpage()
    glyphs: list[tuple[str, tuple[float, ...]]] = []
    for i in range(textpage.count_chars()):
        char = chr(pdfium_c.FPDFText_GetUnicode(textpage, i))
        if not pdfium_c.FPDFText_IsGenerated(textpage, i) and not char.isspace():
            left, bottom, right, top = textpage.get_charbox(i)
            glyphs.append((char, (left, height - top, right, height - bottom)))
    pdf.close()
    return glyphs


def test_every_cell_character_keeps_pdfiums_box_and_added_text_has_none(pricing: bytes) -> None:
    document = _parse(pricing)
    boxes = document.char_boxes[0]
    rows = [b.span for b in document.blocks if b.kind is BlockKind.TABLE_ROW]
    # What the row format adds (labels, separators, spaces) has no box; each value glyph has one.
    masked = [
        "".join(
            "#" if not math.isnan(boxes[i, 0]) else document.text[i] for i in range(s.start, s.end)
        )
        for s in rows
    ]
    assert masked == [
        format_row(CELLS[0], [re.sub(r"\S", "#", v) for v in row]) for row in CELLS[1:]
    ]
    # PDFium draws the page in order: heading, paragraph, header cells, body cells, paragraph.
    ours = [(document.text[i], tuple(boxes[i])) for s in rows for i in range(s.start, s.end)]
    ours = [(char, box) for char, box in ours if not math.isnan(box[0])]
    skip = len("Pricing") + len(BEFORE.replace(" ", "")) + len("".join(CELLS[0]))
    theirs = _pdfium_glyphs(pricing)[skip : skip + len(ours)]
    assert [char for char, _ in ours] == [char for char, _ in theirs]
    np.testing.assert_allclose([box for _, box in ours], [box for _, box in theirs], atol=1e-3)


def test_a_search_for_a_value_finds_its_row_with_the_column_names(
    pricing: bytes, settings: Settings
) -> None:
    with Library.open(settings) as library:
        library.create_bucket("plans")
        library.ingest(pricing, filename="pricing.pdf", bucket="plans")
        request = SearchRequest(query="1,200", bucket_ids=("plans",), mode=RetrievalMode.LEXICAL)
        best = library.search(request)[0]
    assert ROWS[2] in best.chunk.text
    assert BEFORE not in best.chunk.text  # table rows are chunked apart from prose
    assert best.page_number == 1


@pytest.mark.parametrize("name", sorted(WITHOUT_TABLES))
def test_a_pdf_without_tables_reads_as_before(documents: Path, name: str) -> None:
    document = _parse((documents / "pdf_text" / f"{name}.pdf").read_bytes())
    assert hashlib.sha256(document.text.encode()).hexdigest() == WITHOUT_TABLES[name]
    assert all(block.kind is not BlockKind.TABLE_ROW for block in document.blocks)


def test_a_framed_paragraph_or_a_single_ruled_row_is_not_a_table() -> None:
    framed = _table([["Note: prices may change."]], style="BOX")
    single = _table([["Basic", "10 €", "1"]])
    document = _parse(_pdf(framed, single))
    assert all(block.kind is not BlockKind.TABLE_ROW for block in document.blocks)
    assert "Note: prices may change.\nBasic 10 € 1" in document.text


def test_a_table_without_a_header_text_keeps_its_values() -> None:
    document = _parse(_pdf(_table([["", "Price"], ["Basic", "10 €"], ["Team", "45 €"]])))
    assert [text for kind, text in _blocks(document) if kind is BlockKind.TABLE_ROW] == [
        "Basic; Price: 10 €",
        "Team; Price: 45 €",
    ]
