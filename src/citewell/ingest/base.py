"""What a parser produces, and the builder every parser uses to produce it.

A parser turns the bytes of one file into a ``ParsedDocument``: one canonical text, the structural
blocks of that text (headings, paragraphs, list items, table rows, records), and for paginated
formats the pages and a box for every character that has one. Sentences and chunks are derived
from this later (``segment.py``, ``chunk.py``); a parser never splits sentences.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

import numpy as np

from citewell.config import IngestSettings
from citewell.model import NOT_READ, CharBoxes, CharConfidences, Modality, Page, Span

if TYPE_CHECKING:
    from citewell.ingest.ocr import Ocr

__all__ = [
    "Block",
    "BlockKind",
    "DocumentBuilder",
    "ParsedDocument",
    "Parser",
    "ScanParser",
]


class BlockKind(StrEnum):
    HEADING = "heading"
    PARAGRAPH = "paragraph"
    LIST_ITEM = "list_item"
    TABLE_ROW = "table_row"
    RECORD = "record"
    CODE = "code"


@dataclass(frozen=True, slots=True)
class Block:
    """A structural unit of the canonical text. Sentences never cross a block boundary."""

    kind: BlockKind
    span: Span
    heading_path: tuple[str, ...]
    """Headings enclosing the block, outermost first. A heading's path holds its parents only."""
    level: int | None = None
    """Level of a heading (1 = top); None for other blocks."""


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    text: str
    blocks: tuple[Block, ...]
    pages: tuple[Page, ...] = ()
    char_boxes: tuple[CharBoxes, ...] = ()
    """One array per page, aligned with ``pages``; empty for sources without pages."""
    char_confidences: tuple[CharConfidences, ...] = ()
    """One array per page, aligned with ``pages`` (see ``CharConfidences``)."""
    title: str | None = None
    modality: Modality = Modality.TEXT


class Parser(Protocol):
    """Turns the bytes of one file into a ParsedDocument.

    Raises ``ParseError`` for damaged, truncated or hostile input and ``FileTooLarge`` when the
    content is over a limit in ``limits``. Never raises anything else for bad input.
    """

    media_types: tuple[str, ...]

    def parse(self, data: bytes, *, filename: str, limits: IngestSettings) -> ParsedDocument: ...


class ScanParser(Protocol):
    """A Parser of a format whose pages may be pixels only (scans, photos): ``ocr`` reads those.

    Without ``ocr``, such pages are image pages without text (or, for a format that is pixels
    only, ``UnsupportedFormat``).
    """

    media_types: tuple[str, ...]

    def parse(
        self, data: bytes, *, filename: str, limits: IngestSettings, ocr: Ocr | None = None
    ) -> ParsedDocument: ...


@dataclass
class _OpenPage:
    number: int
    label: str | None
    width: float
    height: float
    modality: Modality
    start: int
    ocr_confidence: float | None
    boxes: list[Sequence[float] | None] = field(default_factory=list)
    confidences: list[int] = field(default_factory=list)


_NO_BOX = (np.nan, np.nan, np.nan, np.nan)


class DocumentBuilder:
    """Accumulates blocks into a canonical text, keeping headings, pages and boxes in step.

    Blocks are separated by ``block_separator`` (a blank line by default); the separator belongs
    to no block. Text added inside a page must come with one box (or None) per code point.
    """

    def __init__(self, *, block_separator: str = "\n\n") -> None:
        self._parts: list[str] = []
        self._length = 0
        self._blocks: list[Block] = []
        self._headings: list[tuple[int, str]] = []
        self._pages: list[Page] = []
        self._page_boxes: list[CharBoxes] = []
        self._page_confidences: list[CharConfidences] = []
        self._page: _OpenPage | None = None
        self._separator = block_separator
        self.title: str | None = None

    @property
    def heading_path(self) -> tuple[str, ...]:
        return tuple(text for _, text in self._headings)

    def add_block(
        self,
        kind: BlockKind,
        text: str,
        *,
        level: int | None = None,
        boxes: Sequence[Sequence[float] | None] | None = None,
        confidences: Sequence[int] | None = None,
        separator: str | None = None,
    ) -> Block | None:
        """Append one block; returns it, or None if ``text`` is blank.

        ``boxes`` and (for text read by OCR) ``confidences`` have one entry per code point.
        Leading and trailing whitespace is trimmed (with its boxes). A heading closes every open
        heading of the same or a deeper level and opens a new section.
        """
        for per_char, what in ((boxes, "boxes"), (confidences, "confidences")):
            if per_char is not None and len(per_char) != len(text):
                raise ValueError(f"{len(per_char)} {what} for {len(text)} characters")
        stripped = text.strip()
        if not stripped:
            return None
        lead = len(text) - len(text.lstrip())
        kept = slice(lead, lead + len(stripped))
        if self._blocks:
            self._append(self._separator if separator is None else separator, None)
        start = self._length
        self._append(
            stripped,
            None if boxes is None else boxes[kept],
            None if confidences is None else confidences[kept],
        )
        if kind is BlockKind.HEADING:
            depth = level or 1
            while self._headings and self._headings[-1][0] >= depth:
                self._headings.pop()
            block = Block(kind, Span(start=start, end=self._length), self.heading_path, depth)
            self._headings.append((depth, " ".join(stripped.split())))
        else:
            block = Block(kind, Span(start=start, end=self._length), self.heading_path)
        self._blocks.append(block)
        return block

    def extend_block(
        self, text: str, boxes: Sequence[Sequence[float] | None] | None = None
    ) -> None:
        """Append text to the last block (e.g. a paragraph that continues on the next page)."""
        if not self._blocks:
            raise RuntimeError("no block to extend")
        if boxes is not None and len(boxes) != len(text):
            raise ValueError(f"{len(boxes)} boxes for {len(text)} characters")
        self._append(text, boxes)
        last = self._blocks[-1]
        self._blocks[-1] = Block(
            last.kind, Span(start=last.span.start, end=self._length), last.heading_path, last.level
        )

    def start_page(
        self,
        number: int,
        *,
        width: float,
        height: float,
        label: str | None = None,
        modality: Modality = Modality.TEXT,
        ocr_confidence: float | None = None,
    ) -> None:
        if self._page is not None:
            raise RuntimeError("previous page not ended")
        self._page = _OpenPage(number, label, width, height, modality, self._length, ocr_confidence)

    def end_page(self) -> None:
        page = self._page
        if page is None:
            raise RuntimeError("no page started")
        span = Span(start=page.start, end=self._length)
        self._pages.append(
            Page(
                number=page.number,
                label=page.label,
                span=span,
                width=page.width,
                height=page.height,
                modality=page.modality,
                ocr_confidence=page.ocr_confidence,
            )
        )
        rows = [b if b is not None else _NO_BOX for b in page.boxes]
        self._page_boxes.append(np.asarray(rows, dtype=np.float32).reshape(len(rows), 4))
        read = any(c != NOT_READ for c in page.confidences)
        self._page_confidences.append(np.asarray(page.confidences if read else [], dtype=np.uint8))
        self._page = None

    def build(self, modality: Modality | None = None) -> ParsedDocument:
        if self._page is not None:
            raise RuntimeError("page not ended")
        if modality is None:
            kinds = {page.modality for page in self._pages}
            modality = (
                kinds.pop() if len(kinds) == 1 else Modality.MULTIMODAL if kinds else Modality.TEXT
            )
        return ParsedDocument(
            text="".join(self._parts),
            blocks=tuple(self._blocks),
            pages=tuple(self._pages),
            char_boxes=tuple(self._page_boxes),
            char_confidences=tuple(self._page_confidences),
            title=self.title,
            modality=modality,
        )

    def _append(
        self,
        text: str,
        boxes: Sequence[Sequence[float] | None] | None,
        confidences: Sequence[int] | None = None,
    ) -> None:
        if self._page is not None:
            self._page.boxes.extend(boxes if boxes is not None else [None] * len(text))
            self._page.confidences.extend(
                confidences if confidences is not None else [NOT_READ] * len(text)
            )
        self._parts.append(text)
        self._length += len(text)
