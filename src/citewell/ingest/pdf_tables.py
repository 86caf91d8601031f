"""Tables on PDF pages, ruled or not: found from ruling lines or aligned columns, one block a row.

A ruled table is found from the straight, axis-parallel segments of the page's path objects
(stroked lines, and the sides of rectangles, filled or not), read through PDFium as PDFium draws
them: matrices applied, Form XObjects looked into. pdfplumber's grid algorithm (``merge_edges``
→ ``edges_to_intersections`` → ``intersections_to_cells`` → ``cells_to_tables``, its "lines"
strategy with its default tolerances) turns those segments into cells. Only that algorithm is
borrowed: pdfplumber's own reading of the PDF (pdfminer) is never run, so the text and every
box stay PDFium's, the ruling lines are in the same coordinates as the characters, and a page
costs one pass over its objects. A page with fewer than three horizontal and three vertical
rulings is not searched for them (most pages of prose end here).

A table without rulings (borderless, or with horizontal rules only, as booktabs draws them) is
found in the visual lines ``pdf_layout`` groups, once ruled tables are out of the page
(``find_aligned_tables``). A line is cut into cells wherever two glyphs are at least 0.9 of its
font size apart (a word space is about 0.3, and stretched justified spaces stayed under 0.6 in
the PDFs measured). A table is a run of consecutive lines, each cut into the same number of
cells, at least three, no more than 2.5 font sizes apart; between each pair of columns there is
a gutter at least as wide free in every line, and the cells of each column below the header are
aligned left, right or on their centre. A false table scrambles the prose it takes, so the run
must also read as a header over values: the first line's cells all hold a letter and none ends
with a colon (a form's labels do); some column holds only numbers (a dash may stand for one)
under a header without digits (a form's first line holds values, "1 May 2024"); cells hold 2.5
words on average at most (a line of a column of prose holds more); and no line starts a list
item. So these stay prose: tables of text only, two-column tables, tables whose header holds a
number (a year) or leaves a cell empty, and decimal-aligned columns; a row with an empty cell,
or a cell wrapped on two lines, ends the table above it.

A table has at least two rows and two columns; its first row is its header, and each body row
reads as ``tables.format_row`` writes it ("Plan: Basic; Price: 10 €"). A character belongs to
the cell its box's centre falls in (the cells of a table without rulings part at the middle of
its gutters and between its lines); a cell's words (split where PDFium's order breaks or at
spaces) are joined by one space. The labels, separators and spaces added have no box; every
other character keeps its own. Characters in a cell are taken out of the prose (``without``),
and the table's rows are placed before the first paragraph below its top that overlaps it
horizontally (``PageTables``), so prose and table keep their reading order.
"""

from __future__ import annotations

import ctypes
import dataclasses
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby, pairwise
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pypdfium2.raw as pdfium_c
from pdfplumber.table import (
    TableSettings,
    cells_to_tables,
    edges_to_intersections,
    intersections_to_cells,
    merge_edges,
)
from pdfplumber.utils.geometry import filter_edges

from citewell.ingest.base import BlockKind, DocumentBuilder
from citewell.ingest.tables import PAIR_SEPARATOR, collapse, labelled

if TYPE_CHECKING:
    from citewell.ingest.pdf_layout import PageGlyphs

__all__ = ["Line", "PageTables", "Table", "find_aligned_tables", "find_tables", "without"]

MIN_RULINGS = 3  # per direction: two rows (or columns) need three lines
MAX_SEGMENTS = 5000  # a page drawing more is a figure or a map, not searched for tables
ALIGNED = 0.5  # points a segment may lean and still count as horizontal or vertical

# Tables without rulings; lengths are in font sizes of the line.
GUTTER = 0.9  # narrower is a word space; table cells are two paddings apart (12 pt is usual)
MIN_COLUMNS = 3  # two columns of short text are as often a form or a list of pairs
MIN_BODY_ROWS = 2
ROW_STEP = 2.5  # rows further apart (baseline to baseline) are not one table
SIZE_CHANGE = 0.15  # rows of one table share their font size
ALIGN = 0.25  # how far the edges of a column's cells may stray and still be aligned
MAX_MEAN_WORDS = 2.5  # a line of a column of prose holds more, however narrow the column
EDGE = 0.5  # points: a glyph at the table's edge stays inside, even with a box of no size

Box = tuple[float, float, float, float]
Matrix = tuple[float, float, float, float, float, float]
Edge = dict[str, Any]  # pdfplumber's edge objects are plain dicts

_IDENTITY: Matrix = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
_LETTER = re.compile(r"[^\W\d_]")
_DIGIT = re.compile(r"\d")
_NUMBER = re.compile(r"[-+−±(]?[$€£¥]?\s?\d[\d.,\s]*(?:%|‰|[$€£¥])?\)?")
_PLACEHOLDERS = frozenset({"-", "–", "—", "−"})  # a missing value in a column of numbers
_SETTINGS = TableSettings.resolve(None)


@dataclass(frozen=True, slots=True)
class Table:
    """A table in text space (top-left origin of the unrotated page, PDF points)."""

    bbox: Box
    rows: tuple[tuple[Box | None, ...], ...]
    """Cell boxes row by row, one per column; None where a merged cell spans that column."""


def find_tables(page: Any, crop: Box) -> tuple[Table, ...]:
    """The ruled tables of a PDFium page (a ``PdfPage``); ``crop`` is its crop box."""
    edges = _Rulings(crop).read(page.raw)
    if edges is None or not _enough(edges):
        return ()
    edges = merge_edges(
        edges,
        _SETTINGS.snap_x_tolerance,
        _SETTINGS.snap_y_tolerance,
        _SETTINGS.join_x_tolerance,
        _SETTINGS.join_y_tolerance,
    )
    edges = filter_edges(edges, min_length=_SETTINGS.edge_min_length)
    if not _enough(edges):
        return ()
    intersections = edges_to_intersections(
        edges, _SETTINGS.intersection_x_tolerance, _SETTINGS.intersection_y_tolerance
    )
    grids = (_table(cells) for cells in cells_to_tables(intersections_to_cells(intersections)))
    return tuple(table for table in grids if len(table.rows) >= 2 and len(table.rows[0]) >= 2)


def _enough(edges: Sequence[Edge]) -> bool:
    horizontal = sum(1 for edge in edges if edge["orientation"] == "h")
    return min(horizontal, len(edges) - horizontal) >= MIN_RULINGS


def _table(cells: Sequence[Box]) -> Table:
    columns = sorted({cell[0] for cell in cells})
    rows = []
    for _, row in groupby(sorted(cells, key=lambda cell: (cell[1], cell[0])), lambda c: c[1]):
        by_x = {cell[0]: cell for cell in row}
        rows.append(tuple(by_x.get(x) for x in columns))
    x0, top = min(c[0] for c in cells), min(c[1] for c in cells)
    x1, bottom = max(c[2] for c in cells), max(c[3] for c in cells)
    return Table((x0, top, x1, bottom), tuple(rows))


class _Rulings:
    """Reads the axis-parallel segments of a page's visible paths as pdfplumber edges."""

    def __init__(self, crop: Box) -> None:
        self._left, self._top = crop[0], crop[3]
        self._x, self._y = ctypes.c_float(), ctypes.c_float()
        self._fill, self._stroke = ctypes.c_int(), ctypes.c_int()
        self._matrix = pdfium_c.FS_MATRIX()
        self._segments = 0
        self.edges: list[Edge] = []

    def read(self, page: Any) -> list[Edge] | None:
        """The page's edges, or None when it draws more than ``MAX_SEGMENTS`` segments."""
        objects = (
            pdfium_c.FPDFPage_GetObject(page, i)
            for i in range(pdfium_c.FPDFPage_CountObjects(page))
        )
        for path, matrix in self._paths(objects, _IDENTITY):
            if not self._visible(path):
                continue
            self._segments += pdfium_c.FPDFPath_CountSegments(path)
            if self._segments > MAX_SEGMENTS:
                return None
            self._add_path(path, matrix)
        return self.edges

    def _paths(self, objects: Iterator[Any], outer: Matrix) -> Iterator[tuple[Any, Matrix]]:
        for obj in objects:
            kind = pdfium_c.FPDFPageObj_GetType(obj)
            if kind not in (pdfium_c.FPDF_PAGEOBJ_PATH, pdfium_c.FPDF_PAGEOBJ_FORM):
                continue
            matrix = _then(self._own_matrix(obj), outer)
            if kind == pdfium_c.FPDF_PAGEOBJ_PATH:
                yield obj, matrix
                continue
            count = pdfium_c.FPDFFormObj_CountObjects(obj)
            inner = (pdfium_c.FPDFFormObj_GetObject(obj, i) for i in range(max(count, 0)))
            yield from self._paths(inner, matrix)

    def _own_matrix(self, obj: Any) -> Matrix:
        m = self._matrix
        if not pdfium_c.FPDFPageObj_GetMatrix(obj, m):
            return _IDENTITY
        return (m.a, m.b, m.c, m.d, m.e, m.f)

    def _visible(self, path: Any) -> bool:
        if not pdfium_c.FPDFPath_GetDrawMode(path, self._fill, self._stroke):
            return False
        return self._fill.value != pdfium_c.FPDF_FILLMODE_NONE or bool(self._stroke.value)

    def _add_path(self, path: Any, matrix: Matrix) -> None:
        start = current = (0.0, 0.0)
        for index in range(pdfium_c.FPDFPath_CountSegments(path)):
            segment = pdfium_c.FPDFPath_GetPathSegment(path, index)
            pdfium_c.FPDFPathSegment_GetPoint(segment, self._x, self._y)
            point = self._place(matrix, self._x.value, self._y.value)
            kind = pdfium_c.FPDFPathSegment_GetType(segment)
            if kind == pdfium_c.FPDF_SEGMENT_MOVETO:
                start = point
            elif kind == pdfium_c.FPDF_SEGMENT_LINETO:
                self._add_segment(current, point)
            current = point  # a Bézier control point ends as the current point too
            if pdfium_c.FPDFPathSegment_GetClose(segment):
                self._add_segment(current, start)
                current = start

    def _place(self, matrix: Matrix, x: float, y: float) -> tuple[float, float]:
        """A point of path space in text space (top-left origin of the crop box)."""
        a, b, c, d, e, f = matrix
        return a * x + c * y + e - self._left, self._top - (b * x + d * y + f)

    def _add_segment(self, p: tuple[float, float], q: tuple[float, float]) -> None:
        x0, x1 = sorted((p[0], q[0]))
        top, bottom = sorted((p[1], q[1]))
        if bottom - top <= ALIGNED and x1 - x0 >= _SETTINGS.edge_min_length_prefilter:
            self.edges.append(_edge("h", x0, x1, top, top))
        elif x1 - x0 <= ALIGNED and bottom - top >= _SETTINGS.edge_min_length_prefilter:
            self.edges.append(_edge("v", x0, x0, top, bottom))


def _edge(orientation: str, x0: float, x1: float, top: float, bottom: float) -> Edge:
    return {
        "orientation": orientation,
        "x0": x0,
        "x1": x1,
        "top": top,
        "bottom": bottom,
        "doctop": top,
        "width": x1 - x0,
        "height": bottom - top,
        "object_type": "line",
    }


def _then(inner: Matrix, outer: Matrix) -> Matrix:
    """The matrix applying ``inner`` first, then ``outer`` (PDF row-vector convention)."""
    a, b, c, d, e, f = inner
    oa, ob, oc, od, oe, of = outer
    return (
        a * oa + b * oc,
        a * ob + b * od,
        c * oa + d * oc,
        c * ob + d * od,
        e * oa + f * oc + oe,
        e * ob + f * od + of,
    )


@dataclass(frozen=True, slots=True)
class Line:
    """A visual line of a page as ``pdf_layout`` groups them, for ``find_aligned_tables``."""

    spans: tuple[tuple[int, int], ...]
    """Ranges of the page's text the line is made of, left to right."""
    size: float
    baseline: float
    listed: bool
    """Whether the line starts a list item (a bullet or a list number)."""


@dataclass(frozen=True, slots=True)
class _Cell:
    x0: float
    x1: float
    text: str


@dataclass(frozen=True, slots=True)
class _Split:
    """A line cut into cells at its wide gaps, with the vertical extent of its glyphs' centres."""

    line: Line
    cells: tuple[_Cell, ...]
    top: float
    bottom: float
    centres: tuple[float, float]


def find_aligned_tables(page: PageGlyphs, lines: Sequence[Line]) -> tuple[Table, ...]:
    """The tables without rulings among the ``lines`` of ``page`` (see the module docs)."""
    return tuple(_aligned_table(run) for run in _runs(page, lines) if _is_table(run))


def _runs(page: PageGlyphs, lines: Sequence[Line]) -> Iterator[list[_Split]]:
    """Maximal runs of consecutive lines whose cells keep to the same columns."""
    text = page.text
    visible = np.fromiter((not c.isspace() for c in text), dtype=np.bool_, count=len(text))
    glyph = visible & ~np.isnan(page.boxes[:, 0])
    run: list[_Split] = []
    for line in lines:
        split = _split(page, glyph, line)
        if split is not None and run and _extends(run, split):
            run.append(split)
            continue
        yield run
        run = [] if split is None else [split]
    yield run


def _split(page: PageGlyphs, glyph: npt.NDArray[np.bool_], line: Line) -> _Split | None:
    """``line`` cut at its gutters; None for a list item or a line of fewer than three cells."""
    if line.listed:
        return None
    indices = np.concatenate([s + np.flatnonzero(glyph[s:e]) for s, e in line.spans])
    boxes = page.boxes[indices]
    reach = np.maximum.accumulate(boxes[:, 2])  # a glyph may overhang the next (kerning)
    cuts = (np.flatnonzero(boxes[1:, 0] - reach[:-1] >= GUTTER * line.size) + 1).tolist()
    if len(cuts) < MIN_COLUMNS - 1:
        return None
    cells = tuple(
        _Cell(
            x0=float(boxes[a:b, 0].min()),
            x1=float(boxes[a:b, 2].max()),
            text=collapse(page.text[indices[a] : indices[b - 1] + 1]),
        )
        for a, b in zip([0, *cuts], [*cuts, len(indices)], strict=True)
    )
    centres = (boxes[:, 1] + boxes[:, 3]) / 2
    return _Split(
        line,
        cells,
        top=float(boxes[:, 1].min()),
        bottom=float(boxes[:, 3].max()),
        centres=(float(centres.min()), float(centres.max())),
    )


def _extends(run: Sequence[_Split], split: _Split) -> bool:
    """Whether ``split`` can be the next row of the table ``run`` begins."""
    last = run[-1].line
    size = max(last.size, split.line.size)
    return (
        len(split.cells) == len(run[0].cells)
        and abs(split.line.size - last.size) <= SIZE_CHANGE * size
        and 0 < split.line.baseline - last.baseline <= ROW_STEP * size
        and run[-1].centres[1] < split.centres[0]
        and _columns_hold([*run, split], size)
    )


def _columns_hold(rows: Sequence[_Split], size: float) -> bool:
    """Whether a gutter free in every row parts each pair of columns, and the body is aligned.

    The header may be aligned otherwise (centred over right-aligned numbers, say).
    """
    bands = _bands(rows)
    gutters = all(right + GUTTER * size <= left for (_, right), (left, _) in pairwise(bands))
    return gutters and all(
        _aligned([row.cells[column] for row in rows[1:]], ALIGN * size)
        for column in range(len(bands))
    )


def _bands(rows: Sequence[_Split]) -> list[tuple[float, float]]:
    """Each column's extent over ``rows``."""
    return [
        (min(cell.x0 for cell in column), max(cell.x1 for cell in column))
        for column in zip(*(row.cells for row in rows), strict=True)
    ]


def _aligned(cells: Sequence[_Cell], tolerance: float) -> bool:
    """Whether the cells share their left edge, their right edge or their centre."""
    lefts, rights = [cell.x0 for cell in cells], [cell.x1 for cell in cells]
    centres = [(cell.x0 + cell.x1) / 2 for cell in cells]
    return any(max(xs) - min(xs) <= tolerance for xs in (lefts, rights, centres))


def _is_table(run: Sequence[_Split]) -> bool:
    """Whether an aligned ``run`` reads as a header of words above rows of short values."""
    if len(run) < 1 + MIN_BODY_ROWS:
        return False
    header, body = run[0].cells, [row.cells for row in run[1:]]
    words = [len(cell.text.split()) for row in run for cell in row.cells]
    return (
        all(_LETTER.search(cell.text) and not cell.text.endswith(":") for cell in header)
        and sum(words) <= MAX_MEAN_WORDS * len(words)
        and _numeric_column(header, body)
    )


def _numeric_column(header: Sequence[_Cell], body: Sequence[Sequence[_Cell]]) -> bool:
    """Whether a column holds numbers only (a dash may stand for one) under a header of words.

    A header with a digit ("1 May 2024") may be a value itself: a form's first line, say.
    """
    return any(
        not _DIGIT.search(top.text)
        and all(_NUMBER.fullmatch(cell.text) or cell.text in _PLACEHOLDERS for cell in column)
        and any(_NUMBER.fullmatch(cell.text) for cell in column)
        for top, *column in zip(header, *body, strict=True)
    )


def _aligned_table(run: Sequence[_Split]) -> Table:
    """Cells parted at the middle of the gutters and between the rows' glyphs."""
    bands = _bands(run)
    xs = [
        bands[0][0] - EDGE,
        *((right + left) / 2 for (_, right), (left, _) in pairwise(bands)),
        bands[-1][1] + EDGE,
    ]
    ys = [
        run[0].top - EDGE,
        *((above.centres[1] + below.centres[0]) / 2 for above, below in pairwise(run)),
        run[-1].bottom + EDGE,
    ]
    rows = tuple(
        tuple((x0, top, x1, bottom) for x0, x1 in pairwise(xs)) for top, bottom in pairwise(ys)
    )
    return Table((xs[0], ys[0], xs[-1], ys[-1]), rows)


def _cell_mask(page: PageGlyphs, cell: Box) -> npt.NDArray[np.bool_]:
    boxes = page.boxes
    cx = (boxes[:, 0] + boxes[:, 2]) / 2
    cy = (boxes[:, 1] + boxes[:, 3]) / 2
    return (cx >= cell[0]) & (cx < cell[2]) & (cy >= cell[1]) & (cy < cell[3])  # NaN: False


def _cell_text(page: PageGlyphs, cell: Box | None) -> tuple[str, list[int | None]]:
    """The cell's words joined by one space, with each character's index on the page."""
    if cell is None:
        return "", []
    text: list[str] = []
    indices: list[int | None] = []
    previous = -2
    for index in np.flatnonzero(_cell_mask(page, cell)).tolist():
        char = page.text[index]
        if char.isspace():
            continue
        if text and index != previous + 1:
            text.append(" ")
            indices.append(None)
        text.append(char)
        indices.append(index)
        previous = index
    return "".join(text), indices


@dataclass(frozen=True, slots=True)
class _RowText:
    text: str
    indices: list[int | None]
    """Index on the page of each character of ``text``; None for what the row format adds."""


def _row_text(header: Sequence[str], cells: Sequence[tuple[str, list[int | None]]]) -> _RowText:
    values = [value for value, _ in cells]
    text = ""
    indices: list[int | None] = []
    for label, column in labelled(header, values):
        added = (PAIR_SEPARATOR if text else "") + label
        text += added + values[column]
        indices += [None] * len(added) + cells[column][1]
    return _RowText(text, indices)


def _rows(page: PageGlyphs, table: Table) -> list[_RowText]:
    rows = [[_cell_text(page, cell) for cell in row] for row in table.rows]
    header = [collapse(text) for text, _ in rows[0]]
    return [_row_text(header, cells) for cells in rows[1:]]


def _in_tables(page: PageGlyphs) -> npt.NDArray[np.bool_]:
    mask = np.zeros(len(page.text), dtype=np.bool_)
    for table in page.tables:
        for cell in (cell for row in table.rows for cell in row if cell is not None):
            mask |= _cell_mask(page, cell)
    return mask


def without(page: PageGlyphs) -> PageGlyphs:
    """The page without the characters of its tables' cells: what is left is prose.

    Spaces next to a removed character go with it; line ends stay (an empty line is no text).
    """
    if not page.tables:
        return page
    removed = _in_tables(page)
    near = removed.copy()
    near[1:] |= removed[:-1]
    near[:-1] |= removed[1:]
    keep = np.array(
        [
            not (removed[i] or (near[i] and char.isspace() and char != "\n"))
            for i, char in enumerate(page.text)
        ],
        dtype=np.bool_,
    )
    return dataclasses.replace(
        page,
        text="".join(char for char, kept in zip(page.text, keep.tolist(), strict=True) if kept),
        boxes=page.boxes[keep],
        sizes=page.sizes[keep],
        baselines=page.baselines[keep],
        emphasis=page.emphasis[keep],
        tables=(),
    )


class PageTables:
    """The tables of one page, handed to the builder in reading order among its paragraphs.

    ``boxes`` are the page's character boxes as displayed (the builder's boxes), by index.
    """

    def __init__(self, page: PageGlyphs, boxes: Sequence[Box | None]) -> None:
        self._page = page
        self._boxes = boxes
        self._pending = sorted(page.tables, key=lambda table: (table.bbox[1], table.bbox[0]))

    def add_above(self, builder: DocumentBuilder, extent: Box) -> bool:
        """Add the tables that come before a paragraph at ``extent``; whether any was added.

        ``extent`` is the paragraph's box in text space, its top at its first baseline.
        """
        above = [
            table
            for table in self._pending
            if table.bbox[1] <= extent[1]
            and table.bbox[0] < extent[2]
            and extent[0] < table.bbox[2]
        ]
        return self._add(builder, above)

    def add_rest(self, builder: DocumentBuilder) -> bool:
        """Add the tables not placed yet (below all prose); whether any was added."""
        return self._add(builder, list(self._pending))

    def _add(self, builder: DocumentBuilder, tables: Sequence[Table]) -> bool:
        added = False
        for table in tables:
            self._pending.remove(table)
            for row in _rows(self._page, table):
                boxes = [None if i is None else self._boxes[i] for i in row.indices]
                added |= builder.add_block(BlockKind.TABLE_ROW, row.text, boxes=boxes) is not None
        return added
