"""The pages an answer's citations need, read once per answer.

Attribution places each cited range on its pages and boxes (``regions.PageBoxes``); one answer
cites the same few sources again and again, so their pages, character boxes and OCR
confidences are read from the store once, when first needed, and pages the search read with
its passages are not read again. Sources that came with the request have pages but no boxes.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from citewell.model import CharBoxes, CharConfidences, Page

__all__ = ["PageCache", "StoredPages"]


class StoredPages(Protocol):
    """Where stored sources' pages are read from (the store)."""

    def source_pages(self, source_id: str) -> tuple[Page, ...]: ...

    def char_boxes(self, source_id: str, page_number: int) -> CharBoxes: ...

    def char_confidences(self, source_id: str, page_number: int) -> CharConfidences: ...


class PageCache:
    """Pages of cited sources and their characters' boxes and OCR confidences, read once per
    answer (given sources' pages come with them, without either)."""

    def __init__(
        self,
        stored: StoredPages,
        given: dict[str, tuple[Page, ...]],
        retrieved: dict[str, tuple[Page, ...]] | None = None,
    ) -> None:
        """``given``: the pages of sources that came with the request; ``retrieved``: those the
        search read already, with its passages."""
        self._stored = stored
        self._pages = {**(retrieved or {}), **given}
        self._given = frozenset(given)
        self._boxes: dict[tuple[str, int], CharBoxes] = {}
        self._confidences: dict[tuple[str, int], CharConfidences] = {}

    def pages(self, source_id: str) -> tuple[Page, ...]:
        if source_id not in self._pages:
            self._pages[source_id] = self._stored.source_pages(source_id)
        return self._pages[source_id]

    def char_boxes(self, source_id: str, page_number: int) -> CharBoxes:
        key = (source_id, page_number)
        if key not in self._boxes:
            self._boxes[key] = (
                np.empty((0, 4), dtype=np.float32)
                if source_id in self._given
                else self._stored.char_boxes(source_id, page_number)
            )
        return self._boxes[key]

    def char_confidences(self, source_id: str, page_number: int) -> CharConfidences:
        key = (source_id, page_number)
        if key not in self._confidences:
            self._confidences[key] = (
                np.empty(0, dtype=np.uint8)
                if source_id in self._given
                else self._stored.char_confidences(source_id, page_number)
            )
        return self._confidences[key]
