"""Where a range of a source's text lies on its pages: one box per line, one list per page.

The boxes come from the box every character of a page has (``CharBoxes``: text PDFs get them
from PDFium, scans and images from their OCR words), so any source with pages is drawn the same
way. Characters are taken in text order; each one joins the current box when it sits on the
box's line, else it starts a new box. It sits on the line when their vertical extents overlap by
at least a quarter of the smaller height (glyph boxes are tight: a comma hangs below the
baseline, an "x" stops at its x-height), and it lies at most ``_GAP`` line heights to the side
(a wider gap is the next column or table cell). Whitespace is left out: PDFium's spaces are flat
boxes on the baseline, and one at a line's end would stretch the box past the last letter.

Coordinates are rounded outwards to ``_DECIMALS`` places, so a box still encloses its characters.

Where OCR read the page, a region also says how sure OCR was of the least certain word in it:
a reader can tell that a highlight may rest on misread text.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol

from citewell.model import NOT_READ, Box, CharBoxes, CharConfidences, Page, PageRegion, Span

__all__ = ["PageBoxes", "least_confidence", "line_boxes", "regions"]

_GAP = 3.0
"""Widest sideways gap within one line box, in line heights (a word space is about 0.3)."""
_OVERLAP = 0.25
"""Least vertical overlap of a character with its line, in the smaller of their heights."""
_DECIMALS = 2


class PageBoxes(Protocol):
    """The pages of sources and the boxes of their characters (the engine reads them once)."""

    def pages(self, source_id: str) -> Sequence[Page]: ...

    def char_boxes(self, source_id: str, page_number: int) -> CharBoxes:
        """One row per code point of the page; empty when the page has no boxes."""
        ...

    def char_confidences(self, source_id: str, page_number: int) -> CharConfidences:
        """One per code point of the page; empty when OCR did not read the page."""
        ...


def regions(
    pages: Sequence[Page],
    span: Span,
    text: str,
    boxes_of: Callable[[int], CharBoxes],
    confidences_of: Callable[[int], CharConfidences] | None = None,
) -> tuple[PageRegion, ...]:
    """The boxes of ``span`` (whose text is ``text``) on each page it crosses; ``boxes_of``
    gives a page's character boxes by page number, ``confidences_of`` its OCR confidences.
    Pages where the range has no box are left out."""
    found = []
    for page in pages:
        start, end = max(span.start, page.span.start), min(span.end, page.span.end)
        if start >= end:
            continue
        on_page = slice(start - page.span.start, end - page.span.start)
        boxes = line_boxes(
            text[start - span.start : end - span.start], boxes_of(page.number)[on_page]
        )
        if boxes:
            found.append(
                PageRegion(
                    page_number=page.number,
                    page_label=page.label,
                    page_width=page.width,
                    page_height=page.height,
                    boxes=boxes,
                    ocr_confidence=(
                        least_confidence(confidences_of(page.number)[on_page])
                        if confidences_of
                        else None
                    ),
                )
            )
    return tuple(found)


def least_confidence(confidences: CharConfidences) -> int | None:
    """The confidence of the least certain word among ``confidences``; None when OCR read none
    of these characters."""
    read = confidences[confidences != NOT_READ]
    return int(read.min()) if read.size else None


def line_boxes(text: str, boxes: CharBoxes) -> tuple[Box, ...]:
    """The characters' boxes merged per line; ``boxes`` has one row per character of ``text``
    (fewer rows when the page's boxes end first)."""
    merged: list[list[float]] = []
    for char, row in zip(text, boxes.tolist(), strict=False):
        if char.isspace() or math.isnan(row[0]):
            continue
        if merged and _same_line(merged[-1], row):
            last = merged[-1]
            last[0], last[1] = min(last[0], row[0]), min(last[1], row[1])
            last[2], last[3] = max(last[2], row[2]), max(last[3], row[3])
        else:
            merged.append(row)
    return tuple(_rounded(*box) for box in merged)


def _same_line(line: Sequence[float], box: Sequence[float]) -> bool:
    height = min(line[3] - line[1], box[3] - box[1])
    overlap = min(line[3], box[3]) - max(line[1], box[1])
    if overlap < height * _OVERLAP:
        return False
    gap = max(box[0] - line[2], line[0] - box[2])
    return gap <= _GAP * max(line[3] - line[1], box[3] - box[1])


def _rounded(x0: float, y0: float, x1: float, y1: float) -> Box:
    scale = 10**_DECIMALS
    return Box(
        x0=math.floor(x0 * scale) / scale,
        y0=math.floor(y0 * scale) / scale,
        x1=math.ceil(x1 * scale) / scale,
        y1=math.ceil(y1 * scale) / scale,
    )
