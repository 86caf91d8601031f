"""The short names people read next to a citation: ``handbook.pdf (p. iv)``, ``faq.md (§ Refunds)``.

Search results render these today and answers will render the same ones, so they are made here,
from plain values, and nowhere else.

A *locator* says where in a source a range lies:

- on a paginated source, the page the range starts on: ``p. 4``, or the page's own printed label
  when the document defines one that differs from its position (``p. iv`` for the fourth page of
  a front matter numbered in roman numerals) — the label is what a reader finds on the paper;
- on a source without pages, the innermost heading enclosing the range: ``§ Refunds``;
- otherwise nothing (``None``): a plain note with no headings is located by its name alone.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from citewell.model import Page, Span

__all__ = ["block_range", "locator_label", "page_at", "source_label"]

_MAX_HEADING = 60
"""Headings longer than this are shortened: a label sits on one line next to a citation mark."""


def locator_label(
    *, page_number: int | None, page_label: str | None, heading_path: Sequence[str] = ()
) -> str | None:
    """Where a range lies within its source, for a reader; ``None`` when nothing narrower exists."""
    if page_number is not None:
        label = " ".join((page_label or "").split())
        return f"p. {label or page_number}"
    for heading in reversed(heading_path):
        text = " ".join(heading.split())
        if text:
            return f"§ {_shorten(text)}"
    return None


def source_label(filename: str, locator: str | None) -> str:
    """The file name, followed by the locator in parentheses when there is one."""
    return f"{filename} ({locator})" if locator else filename


def page_at(pages: Sequence[Page], offset: int) -> Page | None:
    """The page holding the code point at ``offset`` (pages tile the text in order)."""
    if not pages:
        return None
    index = bisect.bisect_right([p.span.start for p in pages], offset) - 1
    return pages[max(0, index)]


def block_range(units: Sequence[Span], span: Span) -> tuple[int, int]:
    """(start, end) indices of the units a range covers, end exclusive (empty units at the
    range's edges are not counted)."""
    start = next((i for i, u in enumerate(units) if u.end > span.start), len(units) - 1)
    end = max((i for i, u in enumerate(units) if u.start < span.end), default=start)
    return start, max(end, start) + 1


def _shorten(text: str) -> str:
    if len(text) <= _MAX_HEADING:
        return text
    return text[: _MAX_HEADING - 1].rstrip() + "…"
