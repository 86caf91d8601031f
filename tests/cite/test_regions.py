"""Boxes of a cited range: one per printed line, one list per page, exactly around its glyphs."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from citewell.cite.regions import line_boxes, regions
from citewell.config import IngestSettings
from citewell.ingest import parse
from citewell.ingest.base import ParsedDocument
from citewell.model import Page, PageRegion, Span
from tests.cite.pdf_glyphs import fit, page_glyphs, split_glyphs

LAST_ON_PAGE_1 = "Over the years, Microsoft Word"
FIRST_ON_PAGE_2 = "Other notable software from this era included WordPerfect"


@pytest.fixture(scope="module")
def pdf(evaldata: Path) -> bytes:
    return (evaldata / "documents" / "pdf_text" / "multi_page.pdf").read_bytes()


@pytest.fixture(scope="module")
def document(pdf: bytes) -> ParsedDocument:
    return parse(pdf, filename="multi_page.pdf", limits=IngestSettings())


def located(document: ParsedDocument, start: int, end: int) -> tuple[PageRegion, ...]:
    """The regions of ``text[start:end]``, from the boxes the parser gave each character."""
    span = Span(start=start, end=end)
    return regions(
        document.pages, span, document.text[start:end], lambda n: document.char_boxes[n - 1]
    )


def test_a_range_across_a_page_break_has_one_box_list_per_page(
    document: ParsedDocument, pdf: bytes
) -> None:
    text = document.text
    start = text.index(LAST_ON_PAGE_1)
    end = text.index("capabilities.", text.index(FIRST_ON_PAGE_2)) + len("capabilities.")
    found = located(document, start, end)
    assert [r.page_number for r in found] == [1, 2]
    assert [len(r.boxes) for r in found] == [2, 3]  # the lines each page prints of the range
    for region in found:
        page = document.pages[region.page_number - 1]
        part = text[max(start, page.span.start) : min(end, page.span.end)]
        cited, others = split_glyphs(page_glyphs(pdf, region.page_number), part)
        measured = fit(region.boxes, cited, others)
        assert measured.edge_error <= 0.0101 and measured.overlap == 0.0


def test_every_printed_line_is_one_box(document: ParsedDocument) -> None:
    lines = 0
    for page in document.pages:
        for line in re.finditer(r"[^\n]*\S[^\n]*", document.text[page.span.start : page.span.end]):
            [region] = located(
                document, page.span.start + line.start(), page.span.start + line.end()
            )
            assert len(region.boxes) == 1, line.group()
            lines += 1
    assert lines == 136


def test_whitespace_adds_no_box_and_widens_none(document: ParsedDocument) -> None:
    text = document.text
    start = text.index(LAST_ON_PAGE_1)
    end = text.index("\n", start)  # the line ends with a space, then the line break
    assert text[end - 1] == " "
    [with_space] = located(document, start, end + 1)
    [without] = located(document, start, end - 1)
    assert with_space.boxes == without.boxes
    assert located(document, end - 1, end + 1) == ()


def test_a_page_without_boxes_has_no_region() -> None:
    page = Page(number=1, span=Span(start=0, end=5), width=100, height=100)
    empty = np.empty((0, 4), dtype=np.float32)
    assert regions([page], Span(start=0, end=5), "Hello", lambda n: empty) == ()


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        # A comma hangs below the baseline; the letters after it stop at their x-height.
        (
            [(0, 0, 8, 10), (9, 7, 11, 12), (14, 3, 20, 10)],
            [(0, 0, 20, 12)],
        ),
        # The next line starts back at the margin, lower down.
        ([(0, 0, 8, 10), (12, 0, 20, 10), (0, 14, 8, 24)], [(0, 0, 20, 10), (0, 14, 8, 24)]),
        # The next table cell on the same baseline, far to the right.
        ([(0, 0, 8, 10), (100, 0, 108, 10)], [(0, 0, 8, 10), (100, 0, 108, 10)]),
        # Right-to-left text: each letter left of the one before.
        ([(50, 0, 58, 10), (41, 0, 49, 10), (32, 0, 40, 10)], [(32, 0, 58, 10)]),
    ],
)
def test_characters_merge_per_line(
    rows: list[tuple[float, ...]], expected: list[tuple[float, ...]]
) -> None:
    boxes = line_boxes("x" * len(rows), np.asarray(rows, dtype=np.float32))
    assert [(b.x0, b.y0, b.x1, b.y1) for b in boxes] == expected


def test_coordinates_are_rounded_outwards() -> None:
    [box] = line_boxes("a", np.asarray([(1.0049, 2.0051, 3.0001, 4.0)], dtype=np.float32))
    assert (box.x0, box.y0, box.x1, box.y1) == (1.0, 2.0, 3.01, 4.0)
