"""From the characters of PDF pages to blocks: lines, paragraphs, headings and list items.

Pure layout logic over ``PageGlyphs`` (see ``pdf.py`` for how they are read), so it can be
tested without PDFium. The rules, all in text space (the page before its /Rotate, y down):

- **Lines.** PDFium ends each line with ``\\n``. Consecutive lines on one baseline that run left
  to right (a fraction, a superscript, a label after a tab stop) are one visual line, joined
  with nothing or one space instead of the line break.
- **Paragraphs.** A visual line continues the paragraph above unless the step between their
  baselines is over 1.5 times the page's typical step for that font size, the step goes upward
  (a new column; unless the line above leaves a sentence open and this one starts in lowercase),
  the font size changes by more than 15%, or the line is a heading or starts with a bullet or a
  list number. Lines of one paragraph are joined with ``\\n``.
- **Headings.** A line whose font is at least 10% larger than the document's body size is a
  heading; heading levels rank the distinct heading sizes of the whole document, largest first.
  A short line set entirely in bold or italic at body size (when the body itself is not), with
  no closing punctuation, is a heading one level below the smallest size heading.
- **Pages.** A paragraph that ends a page without sentence-final punctuation continues on the
  next page when that page starts with a lowercase letter: the two parts become one block joined
  by ``\\n``, so a sentence can cross the page break. No de-hyphenation: offsets stay faithful.
- **Boxes** are turned into the coordinates of the page as displayed (``rotate_boxes``).
- **Scans.** A page without a text layer (no visible character with a box) is an ``image``
  page; what OCR read on it, if anything, is laid out by ``ocr_layout`` (its own paragraphs,
  no headings), and no sentence runs into or out of it.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from statistics import median

import numpy as np
import numpy.typing as npt

from citewell.ingest.base import BlockKind, DocumentBuilder, ParsedDocument
from citewell.ingest.ocr import PageText
from citewell.ingest.ocr_layout import add_page_text
from citewell.ingest.pdf_tables import Line, PageTables, Table, find_aligned_tables, without
from citewell.model import CharBoxes, Modality

__all__ = ["PageGlyphs", "has_text_layer", "layout_document", "rotate_boxes"]

HEADING_SIZE_RATIO = 1.1  # a heading's font is at least this much larger than the body's
SIZE_CHANGE_RATIO = 0.15  # a larger relative change of font size starts a new paragraph
PARAGRAPH_GAP_RATIO = 1.5  # a step over this many typical line steps starts a new paragraph
DEFAULT_LINE_STEP = 1.2  # typical step between baselines, in font sizes, when too few to measure
MAX_HEADING_WORDS = 30
MAX_EMPHASIS_HEADING_WORDS = 12

_BULLET = re.compile(r"\s*(?:[•◦▪▫‣⁃●○■□·∙➢➤►▶✓✔]|[-–—*](?=\s)|\(?\d{1,3}[.)](?=\s))")
_SENTENCE_END = re.compile(r"[.!?…。！？][\"'”’»)\]]*$")
_CLOSING_PUNCTUATION = tuple(".,;:!?")

Box = tuple[float, float, float, float]


@dataclass(frozen=True, slots=True)
class PageGlyphs:
    """The characters of one page in PDFium's order, as ``pdf.py`` read them.

    ``boxes`` are in text space (top-left origin of the unrotated page, PDF points), NaN for
    characters without a glyph; ``sizes`` and ``baselines`` are NaN there too.
    """

    number: int
    label: str | None
    width: float
    """Width of the page as displayed (after its rotation)."""
    height: float
    rotation: int
    """Clockwise rotation of the page when displayed: 0, 90, 180 or 270."""
    has_images: bool
    text: str
    boxes: CharBoxes
    sizes: npt.NDArray[np.float32]
    baselines: npt.NDArray[np.float32]
    emphasis: npt.NDArray[np.bool_]
    tables: tuple[Table, ...] = ()
    """Tables on the page; their cells' characters are laid out by ``pdf_tables``."""


@dataclass(frozen=True, slots=True)
class _Piece:
    """One line as PDFium ended it: ``text[start:end]`` of its page, without the line end."""

    start: int
    end: int
    size: float
    baseline: float
    x0: float
    x1: float
    glyphs: int
    emphasised: bool


@dataclass(slots=True)
class _Row:
    """A visual line: pieces on one baseline, left to right, and what joins them."""

    pieces: list[_Piece]
    joints: list[str]
    text: str

    @property
    def main(self) -> _Piece:
        return max(self.pieces, key=lambda piece: piece.glyphs)

    @property
    def size(self) -> float:
        return self.main.size

    @property
    def baseline(self) -> float:
        return self.main.baseline

    @property
    def emphasised(self) -> bool:
        return all(piece.emphasised for piece in self.pieces)


@dataclass(slots=True)
class _Paragraph:
    kind: BlockKind
    level: int | None
    rows: list[_Row] = field(default_factory=list)


def rotate_boxes(boxes: CharBoxes, rotation: int, width: float, height: float) -> CharBoxes:
    """Boxes in text space (``width`` x ``height``, unrotated) as seen on the displayed page.

    The page is shown turned ``rotation`` degrees clockwise; NaN rows stay NaN.
    """
    x0, y0, x1, y1 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    turned = {
        0: (x0, y0, x1, y1),
        90: (height - y1, x0, height - y0, x1),
        180: (width - x1, height - y1, width - x0, height - y0),
        270: (y0, width - x1, y1, width - x0),
    }[rotation % 360]
    return np.stack(turned, axis=1).astype(np.float32)


def has_text_layer(page: PageGlyphs) -> bool:
    """Whether the page shows any character of its own; if not, only OCR can read it."""
    return any(
        not char.isspace() and not math.isnan(x0)
        for char, x0 in zip(page.text, page.boxes[:, 0].tolist(), strict=True)
    )


def _median(values: npt.NDArray[np.float32]) -> float:
    """The (upper) median; much cheaper than ``np.median`` on the short arrays of one line."""
    return float(np.sort(values)[len(values) // 2])


def _pieces(page: PageGlyphs) -> list[_Piece]:
    text = page.text
    visible = np.fromiter((not char.isspace() for char in text), dtype=np.bool_, count=len(text))
    glyph = visible & ~np.isnan(page.boxes[:, 0])
    pieces: list[_Piece] = []
    start = 0
    while start <= len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        mask = glyph[start:end]
        if mask.any():
            boxes = page.boxes[start:end][mask]
            pieces.append(
                _Piece(
                    start=start,
                    end=end,
                    size=_median(page.sizes[start:end][mask]),
                    baseline=_median(page.baselines[start:end][mask]),
                    x0=float(boxes[:, 0].min()),
                    x1=float(boxes[:, 2].max()),
                    glyphs=int(mask.sum()),
                    emphasised=bool(page.emphasis[start:end][mask].all()),
                )
            )
        start = end + 1
    return pieces


def _same_row(left: _Piece, right: _Piece) -> bool:
    size = max(left.size, right.size)
    return abs(right.baseline - left.baseline) <= 0.5 * size and right.x0 >= left.x1 - 0.5 * size


def _rows(page: PageGlyphs) -> list[_Row]:
    rows: list[_Row] = []
    for piece in _pieces(page):
        text = page.text[piece.start : piece.end]
        last = rows[-1] if rows else None
        if last is not None and _same_row(last.pieces[-1], piece):
            gap = piece.x0 - last.pieces[-1].x1
            spaced = last.text[-1:].isspace() or text[:1].isspace()
            joint = "" if spaced or gap < 0.25 * piece.size else " "
            last.pieces.append(piece)
            last.joints.append(joint)
            last.text += joint + text
        else:
            rows.append(_Row([piece], [], text))
    return rows


def _size_bucket(size: float) -> float:
    return round(size * 2) / 2


@dataclass(frozen=True, slots=True)
class _Style:
    """What body text and headings look like in this document."""

    body_size: float
    body_emphasised: bool
    levels: dict[float, int]
    """Heading level of each heading size bucket."""

    @classmethod
    def measure(cls, rows: Sequence[_Row]) -> _Style:
        weights: Counter[float] = Counter()
        emphasised: Counter[float] = Counter()
        for row in rows:
            weights[_size_bucket(row.size)] += len(row.text)
            emphasised[_size_bucket(row.size)] += len(row.text) if row.emphasised else 0
        if not weights:
            return cls(0.0, False, {})
        body = weights.most_common(1)[0][0]
        style = cls(body, emphasised[body] * 2 > weights[body], {})
        sizes = {_size_bucket(row.size) for row in rows if style.is_size_heading(row)}
        levels = {size: level for level, size in enumerate(sorted(sizes, reverse=True), start=1)}
        return cls(body, style.body_emphasised, levels)

    def is_size_heading(self, row: _Row) -> bool:
        return (
            row.size >= HEADING_SIZE_RATIO * self.body_size
            and len(row.text.split()) <= MAX_HEADING_WORDS
            and any(char.isalpha() for char in row.text)
        )

    def is_emphasis_heading(self, row: _Row) -> bool:
        text = row.text.strip()
        return (
            not self.body_emphasised
            and row.emphasised
            and row.size >= 0.95 * self.body_size
            and len(text.split()) <= MAX_EMPHASIS_HEADING_WORDS
            and not text.endswith(_CLOSING_PUNCTUATION)
            and any(char.isalpha() for char in text)
        )

    def role(self, row: _Row) -> tuple[BlockKind, int | None]:
        if self.is_size_heading(row):
            return BlockKind.HEADING, self.levels[_size_bucket(row.size)]
        if self.is_emphasis_heading(row):
            return BlockKind.HEADING, len(self.levels) + 1
        if _BULLET.match(row.text):
            return BlockKind.LIST_ITEM, None
        return BlockKind.PARAGRAPH, None


def _typical_steps(rows: Sequence[_Row]) -> dict[float, float]:
    """Median step between the baselines of consecutive lines, per font size, on one page."""
    steps: defaultdict[float, list[float]] = defaultdict(list)
    for above, below in zip(rows, rows[1:], strict=False):
        bucket = _size_bucket(above.size)
        step = below.baseline - above.baseline
        if bucket == _size_bucket(below.size) and 0.3 * above.size < step < 3 * above.size:
            steps[bucket].append(step)
    return {bucket: median(values) for bucket, values in steps.items() if len(values) >= 3}


def _continues(
    paragraph: _Paragraph, kind: BlockKind, level: int | None, row: _Row, steps: dict[float, float]
) -> bool:
    """Whether ``row`` (of role ``kind``/``level``) continues ``paragraph``."""
    above = paragraph.rows[-1]
    if BlockKind.HEADING in (kind, paragraph.kind):
        if (kind, level) != (paragraph.kind, paragraph.level):
            return False
    elif kind is BlockKind.LIST_ITEM:
        return False  # every bullet starts an item
    if abs(row.size - above.size) > SIZE_CHANGE_RATIO * max(row.size, above.size):
        return False
    step = row.baseline - above.baseline
    if step < 0 and kind is BlockKind.PARAGRAPH and paragraph.kind is not BlockKind.HEADING:
        return _runs_on(above.text, row.text)  # the next column, possibly mid-sentence
    typical = steps.get(_size_bucket(above.size), DEFAULT_LINE_STEP * above.size)
    return 0.3 * above.size < step <= PARAGRAPH_GAP_RATIO * typical


def _paragraphs(rows: Sequence[_Row], style: _Style) -> list[_Paragraph]:
    steps = _typical_steps(rows)
    paragraphs: list[_Paragraph] = []
    for row in rows:
        kind, level = style.role(row)
        if paragraphs and _continues(paragraphs[-1], kind, level, row, steps):
            paragraphs[-1].rows.append(row)
        else:
            paragraphs.append(_Paragraph(kind, level, [row]))
    return paragraphs


def _box_list(boxes: CharBoxes) -> list[Box | None]:
    return [
        None if math.isnan(row[0]) else (row[0], row[1], row[2], row[3]) for row in boxes.tolist()
    ]


def _chars(
    page_boxes: list[Box | None], page: PageGlyphs, paragraph: _Paragraph
) -> tuple[str, list[Box | None]]:
    """The paragraph's text, lines joined by ``\\n``, trimmed, with one box (or None) per char."""
    parts: list[str] = []
    boxes: list[Box | None] = []
    for number, row in enumerate(paragraph.rows):
        if number:
            parts.append("\n")
            boxes.append(None)
        for piece, joint in zip(row.pieces, ["", *row.joints], strict=True):
            parts.append(joint + page.text[piece.start : piece.end])
            boxes.extend([None] * len(joint))
            boxes.extend(page_boxes[piece.start : piece.end])
    text = "".join(parts)
    lead = len(text) - len(text.lstrip())
    stripped = text.strip()
    return stripped, boxes[lead : lead + len(stripped)]


def _modality(page: PageGlyphs, rows: Sequence[_Row]) -> Modality:
    if not rows and not page.tables:
        return Modality.IMAGE  # no text layer: only OCR can read it
    return Modality.MULTIMODAL if page.has_images else Modality.TEXT


def _runs_on(text: str, following: str) -> bool:
    """Whether ``following`` continues the sentence ``text`` leaves open."""
    return _SENTENCE_END.search(text.rstrip()) is None and following.lstrip()[:1].islower()


def _continues_across_pages(kind: BlockKind, text: str, paragraph: _Paragraph, first: str) -> bool:
    return (
        kind in (BlockKind.PARAGRAPH, BlockKind.LIST_ITEM)
        and paragraph.kind is BlockKind.PARAGRAPH
        and _runs_on(text, first)
    )


def _extent(paragraph: _Paragraph) -> Box:
    """The paragraph's box in text space, from its first baseline to its last."""
    pieces = [piece for row in paragraph.rows for piece in row.pieces]
    x0, x1 = min(piece.x0 for piece in pieces), max(piece.x1 for piece in pieces)
    return x0, paragraph.rows[0].baseline, x1, paragraph.rows[-1].baseline


def _display_boxes(page: PageGlyphs) -> list[Box | None]:
    turned = page.rotation % 180 == 90
    width, height = (page.height, page.width) if turned else (page.width, page.height)
    return _box_list(rotate_boxes(page.boxes, page.rotation, width, height))


def _with_aligned_tables(page: PageGlyphs) -> tuple[PageGlyphs, PageGlyphs, list[_Row]]:
    """The page with its tables without rulings added, its prose, and the prose's lines."""
    prose = without(page)
    rows = _rows(prose)
    lines = [
        Line(
            spans=tuple((piece.start, piece.end) for piece in row.pieces),
            size=row.size,
            baseline=row.baseline,
            listed=_BULLET.match(row.text) is not None,
        )
        for row in rows
    ]
    aligned = find_aligned_tables(prose, lines)
    if not aligned:
        return page, prose, rows
    page = replace(page, tables=page.tables + aligned)
    prose = without(page)
    return page, prose, _rows(prose)


def layout_document(
    pages: Sequence[PageGlyphs], *, title: str | None, scans: Mapping[int, PageText] | None = None
) -> ParsedDocument:
    """Lay out the pages' characters as blocks of one canonical text (see the module docs).

    ``title`` is the document's own title, if it has a usable one; otherwise the first heading.
    ``scans`` holds what OCR read on pages without a text layer, by page number.
    """
    scans = scans or {}
    laid = [_with_aligned_tables(page) for page in pages]
    style = _Style.measure([row for _, _, rows in laid for row in rows])
    builder = DocumentBuilder()
    last: tuple[BlockKind, str] | None = None
    first_heading: str | None = None
    for page, prose, rows in laid:
        scan = None if rows else scans.get(page.number)
        builder.start_page(
            page.number,
            width=page.width,
            height=page.height,
            label=page.label,
            modality=_modality(page, rows),
            ocr_confidence=scan.confidence if scan is not None else None,
        )
        page_boxes = _display_boxes(prose) if rows else []
        tables = PageTables(page, _display_boxes(page) if page.tables else [])
        if not rows:
            last = None  # a sentence does not run through a page without text
            if scan is not None:
                add_page_text(builder, scan, scale=page.width / scan.width)
        for index, paragraph in enumerate(_paragraphs(rows, style)):
            if tables.add_above(builder, _extent(paragraph)):
                last = None  # no sentence runs through a table
            text, boxes = _chars(page_boxes, prose, paragraph)
            if index == 0 and last is not None and _continues_across_pages(*last, paragraph, text):
                builder.extend_block("\n" + text, [None, *boxes])
                last = (last[0], text)
                continue
            if builder.add_block(paragraph.kind, text, level=paragraph.level, boxes=boxes):
                last = (paragraph.kind, text)
                if paragraph.kind is BlockKind.HEADING and first_heading is None:
                    first_heading = " ".join(text.split())
        if tables.add_rest(builder):
            last = None
        builder.end_page()
    builder.title = title or first_heading
    return builder.build()
