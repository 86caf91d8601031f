"""Ruled tables on PDF pages: found from the page's ruling lines, read as one block per row.

A table is found from the straight, axis-parallel segments of the page's path objects (stroked
lines, and the sides of rectangles, filled or not), read through PDFium as PDFium draws them:
matrices applied, Form XObjects looked into. pdfplumber's grid algorithm (``merge_edges`` →
``edges_to_intersections`` → ``intersections_to_cells`` → ``cells_to_tables``, its "lines"
strategy with its default tolerances) turns those segments into cells. Only that algorithm is
borrowed: pdfplumber's own reading of the PDF (pdfminer) is never run, so the text and every
box stay PDFium's, the ruling lines are in the same coordinates as the characters, and a page
costs one pass over its objects. A page with fewer than three horizontal and three vertical
rulings is not searched (most pages of prose end here). Tables without rulings are not
detected: aligning columns of text is not reliable enough to tell a table from a form or a
two-column layout.

A table has at least two rows and two columns; its first row is its header, and each body row
reads as ``tables.format_row`` writes it ("Plan: Basic; Price: 10 €"). A character belongs to
the cell its box's centre falls in; a cell's words (split where PDFium's order breaks or at
spaces) are joined by one space. The labels, separators and spaces added have no box; every
other character keeps its own. Characters in a cell are taken out of the prose (``without``),
and the table's rows are placed before the first paragraph below its top that overlaps it
horizontally (``PageTables``), so prose and table keep their reading order.
"""

from __future__ import annotations

import ctypes
import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby
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

__all__ = ["PageTables", "Table", "find_tables", "without"]

MIN_RULINGS = 3  # per direction: two rows (or columns) need three lines
MAX_SEGMENTS = 5000  # a page drawing more is a figure or a map, not searched for tables
ALIGNED = 0.5  # points a segment may lean and still count as horizontal or vertical

Box = tuple[float, float, float, float]
Matrix = tuple[float, float, float, float, float, float]
Edge = dict[str, Any]  # pdfplumber's edge objects are plain dicts

_IDENTITY: Matrix = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
_SETTINGS = TableSettings.resolve(None)


@dataclass(frozen=True, slots=True)
class Table:
    """A ruled table in text space (top-left origin of the unrotated page, PDF points)."""

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
