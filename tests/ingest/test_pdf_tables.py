"""PDF tables, ruled or not: each body row is one block that names its columns."""

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
from citewell.ingest import parse, pdf_layout
from citewell.ingest.base import BlockKind, ParsedDocument
from citewell.ingest.tables import format_row
from citewell.library import Library
from citewell.model import RetrievalMode, SearchRequest
from tests.ingest.samples import PageSpec, Run, make_pdf, text_width

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


# How each kind of table is drawn: reportlab's style commands for the whole table.
RULES = {
    "ruled": [("GRID", (0, 0), (-1, -1), 0.5, colors.black)],
    "booktabs": [  # horizontal rules only: above and below the header, below the last row
        ("LINEABOVE", (0, 0), (-1, 0), 1, colors.black),
        ("LINEBELOW", (0, 0), (-1, 0), 0.5, colors.black),
        ("LINEBELOW", (0, -1), (-1, -1), 1, colors.black),
    ],
    "borderless": [],
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


@pytest.fixture(scope="module", params=sorted(RULES))
def pricing(request: pytest.FixtureRequest) -> bytes:
    """The pricing page with its table drawn ruled, with booktabs rules only, or borderless."""
    return _pdf(Table(CELLS, style=RULES[request.param]))


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


def test_a_ruled_and_a_borderless_table_on_one_page_are_both_read() -> None:
    staff = [["Region", "Sales", "Staff"], ["North", "1,204", "12"], ["South", "987", "9"]]
    document = _parse(_pdf(Table(CELLS, style=RULES["ruled"]), Table(staff)))
    assert _blocks(document) == [
        (BlockKind.HEADING, "Pricing"),
        (BlockKind.PARAGRAPH, BEFORE),
        *[(BlockKind.TABLE_ROW, row) for row in ROWS],
        (BlockKind.TABLE_ROW, "Region: North; Sales: 1,204; Staff: 12"),
        (BlockKind.TABLE_ROW, "Region: South; Sales: 987; Staff: 9"),
        (BlockKind.PARAGRAPH, AFTER),
    ]


# --- tables without rulings, drawn at exact positions ---------------------------------------

SIZE = 10
LEFT = 72
PROSE = (
    "The committee reviewed the budget for the coming year and found that most costs were in "
    "line with the plan, although travel and training grew faster than expected, so it asked "
    "the board to cap both at last year's level and to publish a quarterly report on spending "
    "that explains why the reserve fell below the agreed minimum of three months of costs."
)


def _cells(rows: list[list[str]], stops: list[tuple[str, float]], top: float) -> list[Run]:
    """Each row's cells at the column stops, one line every 14 pt from ``top`` down.

    A stop is ``("l", x)`` (the cell starts at x), ``("r", x)`` (ends at x) or ``("c", x)``.
    """
    runs = []
    for number, row in enumerate(rows):
        for text, (align, x) in zip(row, stops, strict=True):
            width = text_width(text, SIZE)
            start = {"l": x, "r": x - width, "c": x - width / 2}[align]
            runs.append(Run(text, start, top - 14 * number, size=SIZE))
    return runs


def _wrapped(text: str, width: float) -> list[list[str]]:
    """The words of ``text`` in lines no wider than ``width`` points."""
    lines: list[list[str]] = [[]]
    for word in text.split():
        if lines[-1] and text_width(" ".join([*lines[-1], word]), SIZE) > width:
            lines.append([])
        lines[-1].append(word)
    return lines


def _justified(lines: list[list[str]], x: float, top: float, width: float) -> list[list[Run]]:
    """Each line's words as runs, spaces stretched to fill ``width`` (0: ragged right).

    The last line is never stretched.
    """
    runs = []
    for number, words in enumerate(lines):
        ink = sum(text_width(word, SIZE) for word in words)
        stretch = width and number < len(lines) - 1 and len(words) > 1
        space = (width - ink) / (len(words) - 1) if stretch else text_width(" ", SIZE)
        left = x
        runs.append([])
        for word in words:
            runs[-1].append(Run(word, left, top - 12 * number, size=SIZE))
            left += text_width(word, SIZE) + space
    return runs


def _page(*runs: Run) -> bytes:
    """A page with a sentence above the runs and one below them."""
    return make_pdf(
        [PageSpec([Run(BEFORE, LEFT, 740, size=SIZE), *runs, Run(AFTER, LEFT, 400, size=SIZE)])]
    )


def _rows_of(document: ParsedDocument) -> list[str]:
    return [text for kind, text in _blocks(document) if kind is BlockKind.TABLE_ROW]


def test_right_aligned_numbers_under_centred_headers_are_a_table() -> None:
    stops = [("l", LEFT), ("r", 300), ("r", 380), ("r", 450)]
    # Each header centred a little left of its numbers' right edge, as a word processor may.
    header = _cells(
        [["Region", "Sales", "Growth", "Staff"]],
        [("l", LEFT), *[("c", x - 15) for _, x in stops[1:]]],
        700,
    )
    body = [
        ["North", "1,204", "3.5%", "12"],
        ["South", "987", "-1.2%", "9"],
        ["East", "2,310", "—", "21"],
    ]
    document = _parse(_page(*header, *_cells(body, stops, 686)))
    assert _blocks(document) == [
        (BlockKind.PARAGRAPH, BEFORE),
        (BlockKind.TABLE_ROW, "Region: North; Sales: 1,204; Growth: 3.5%; Staff: 12"),
        (BlockKind.TABLE_ROW, "Region: South; Sales: 987; Growth: -1.2%; Staff: 9"),
        (BlockKind.TABLE_ROW, "Region: East; Sales: 2,310; Growth: —; Staff: 21"),
        (BlockKind.PARAGRAPH, AFTER),
    ]


def _columns_of_prose(columns: int, *, justify: bool) -> list[Run]:
    """Prose in ``columns`` columns, justified or ragged, drawn line by line across them."""
    width = (612 - 2 * LEFT - 24 * (columns - 1)) / columns
    words = PROSE.split()
    texts = [" ".join(words[9 * n :] + words[: 9 * n]) for n in range(columns)]
    lines = [
        _justified(_wrapped(text, width), LEFT + n * (width + 24), 700, width if justify else 0)
        for n, text in enumerate(texts)
    ]
    return [run for row in zip(*lines, strict=False) for line in row for run in line]


def _wide_paragraph() -> list[Run]:
    """A paragraph set four words a line in a wide measure: every space is over an em."""
    words = (PROSE + " Revenue rose 12 percent to 4,500 in 2023.").split()
    lines = [words[n : n + 4] for n in range(0, len(words), 4)]
    return [run for line in _justified(lines, LEFT, 700, 280) for run in line]


def _narrow_columns_under_headings() -> list[Run]:
    """Five narrow columns of prose, two or three words a line, each under a bold heading."""
    width = 70
    words = PROSE.split()
    columns = [
        [[Run(heading, LEFT + n * (width + 18), 712, size=SIZE, bold=True)]]
        + _justified(_wrapped(" ".join(words[9 * n :]), width), LEFT + n * (width + 18), 700, 0)
        for n, heading in enumerate(["Mission", "Vision", "Values", "Plans", "Goals"])
    ]
    return [run for row in zip(*columns, strict=False) for line in row for run in line]


NOT_TABLES = {
    "two-column prose": _columns_of_prose(2, justify=True),
    "three-column prose": _columns_of_prose(3, justify=True),
    "three-column ragged prose": _columns_of_prose(3, justify=False),
    "narrow columns of prose under bold headings": _narrow_columns_under_headings(),
    "bulleted list": _cells(
        [["Plan", "Price", "Seats"], ["• Basic", "10 €", "1"], ["• Team", "45 €", "5"]],
        [("l", LEFT), ("l", 200), ("l", 300)],
        700,
    ),
    "form": _cells(
        [
            ["Name:", "John Smith", "Date:", "1 May 2024"],
            ["Phone:", "555 1234", "Fax:", "555 9876"],
            ["Zip:", "12345", "Room:", "12"],
        ],
        [("l", LEFT), ("l", 150), ("l", 300), ("l", 380)],
        700,
    ),
    "form without colons": _cells(
        [
            ["Name", "John Smith", "Date", "1 May 2024"],
            ["Address", "1 High Street", "Phone", "555 1234"],
            ["City", "Springfield", "Fax", "555 9876"],
        ],
        [("l", LEFT), ("l", 150), ("l", 300), ("l", 380)],
        700,
    ),
    "right-aligned numbers": _cells(
        [["Revenue", "1,234.00"], ["Costs", "567.00"], ["Profit", "667.00"]],
        [("l", LEFT), ("r", 300)],
        700,
    ),
    "numbers without a header": _cells(
        [["Revenue", "1,234", "1,100"], ["Costs", "567", "500"], ["Profit", "667", "600"]],
        [("l", LEFT), ("r", 300), ("r", 380)],
        700,
    ),
    "contents": _cells(
        [
            ["1", "Introduction", "3"],
            ["2", "Methods", "7"],
            ["3", "Results", "12"],
            ["4", "Discussion", "20"],
        ],
        [("l", LEFT), ("l", LEFT + 24), ("r", 400)],
        700,
    ),
    "wide justified paragraph": _wide_paragraph(),
}


@pytest.mark.parametrize("runs", NOT_TABLES.values(), ids=NOT_TABLES.keys())
def test_text_in_columns_that_is_no_table_reads_as_without_detection(
    runs: list[Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _page(*runs)
    document = _parse(data)
    monkeypatch.setattr(pdf_layout, "find_aligned_tables", lambda page, lines: ())
    assert _blocks(document) == _blocks(_parse(data))
    assert _rows_of(document) == []
