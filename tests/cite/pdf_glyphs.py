"""The glyphs of a PDF page as PDFium reports them, to hold citewell's boxes against.

Boxes are PDFium's tight ``get_charbox`` boxes, moved to the top-left origin of the page's crop
box (the frame of ``citewell.model``). Whitespace and PDFium's generated characters (which have
no glyph) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import pypdfium2
import pypdfium2.raw as pdfium_c

from citewell.model import Box

Rect = tuple[float, float, float, float]


@dataclass(frozen=True, slots=True)
class Glyph:
    char: str
    box: Rect


@dataclass(frozen=True, slots=True)
class Fit:
    """How a list of boxes fits the glyphs of a cited range."""

    glyphs: int
    """Cited glyphs, each inside exactly one box (checked)."""
    edge_error: float
    """Largest distance between a box's edge and the same edge of its glyphs' union, in points."""
    overlap: float
    """Largest share of the area of a glyph outside the range that a box covers."""


def page_glyphs(pdf: bytes, page_number: int) -> list[Glyph]:
    document = pypdfium2.PdfDocument(pdf)
    try:
        page = document[page_number - 1]
        textpage = page.get_textpage()
        left, _, _, top = page.get_bbox()
        glyphs = []
        for index in range(textpage.count_chars()):
            char = chr(pdfium_c.FPDFText_GetUnicode(textpage, index))
            if char.isspace() or pdfium_c.FPDFText_IsGenerated(textpage, index):
                continue
            x0, y1, x1, y0 = textpage.get_charbox(index)
            char = "-" if char in "\x02\ufffe" else char  # a line-end hyphen, as citewell reads it
            glyphs.append(Glyph(char, (x0 - left, top - y0, x1 - left, top - y1)))
        textpage.close()
        page.close()
        return glyphs
    finally:
        document.close()


def split_glyphs(glyphs: list[Glyph], text: str) -> tuple[list[Glyph], list[Glyph]]:
    """(the glyphs of ``text``, every other glyph of the page); ``text`` must occur once."""
    wanted = "".join(c for c in text if not c.isspace())
    printed = "".join(g.char for g in glyphs)
    start = printed.find(wanted)
    assert start >= 0 and printed.find(wanted, start + 1) < 0, f"{text!r} is not printed once"
    end = start + len(wanted)
    return glyphs[start:end], glyphs[:start] + glyphs[end:]


def fit(boxes: tuple[Box, ...], cited: list[Glyph], others: list[Glyph]) -> Fit:
    """Checks that every cited glyph lies in exactly one box and every box holds some; measures
    how closely the boxes hug their glyphs and how much of other glyphs they cover."""
    rects = [(b.x0, b.y0, b.x1, b.y1) for b in boxes]
    members: list[list[Rect]] = [[] for _ in rects]
    for glyph in cited:
        holders = [i for i, rect in enumerate(rects) if _inside(glyph.box, rect)]
        assert len(holders) == 1, f"{glyph} lies in {len(holders)} boxes"
        members[holders[0]].append(glyph.box)
    assert all(members), "a box holds no cited glyph"
    edge_error = max(
        abs(edge - union_edge)
        for rect, held in zip(rects, members, strict=True)
        for edge, union_edge in zip(rect, _union(held), strict=True)
    )
    overlap = max((_covered(g.box, rect) for g in others for rect in rects), default=0.0)
    return Fit(len(cited), edge_error, overlap)


def _inside(inner: Rect, outer: Rect, tolerance: float = 1e-3) -> bool:
    return (
        inner[0] >= outer[0] - tolerance
        and inner[1] >= outer[1] - tolerance
        and inner[2] <= outer[2] + tolerance
        and inner[3] <= outer[3] + tolerance
    )


def _union(rects: list[Rect]) -> Rect:
    return (
        min(r[0] for r in rects),
        min(r[1] for r in rects),
        max(r[2] for r in rects),
        max(r[3] for r in rects),
    )


def _covered(glyph: Rect, rect: Rect) -> float:
    width = min(glyph[2], rect[2]) - max(glyph[0], rect[0])
    height = min(glyph[3], rect[3]) - max(glyph[1], rect[1])
    area = (glyph[2] - glyph[0]) * (glyph[3] - glyph[1])
    return max(0.0, width) * max(0.0, height) / area if area > 0 else 0.0
