"""How a row of a table or a record reads in the canonical text: ``Header: value; Header: value``.

One format for every source of rows (Markdown, HTML and DOCX tables, CSV rows, JSON records), so
that a row cited on its own still says what each value means.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import zip_longest

__all__ = ["format_row", "labelled", "row_headers"]

PAIR_SEPARATOR = "; "
LABEL_SEPARATOR = ": "


def format_row(headers: Sequence[str], values: Sequence[str]) -> str:
    """Pair each value with its column header; empty values are left out.

    A value without a header (an empty header cell, or more values than headers) stands alone.
    Whitespace inside headers and values is collapsed to single spaces.
    """
    return PAIR_SEPARATOR.join(
        label + collapse(values[column]) for label, column in labelled(headers, values)
    )


def labelled(headers: Sequence[str], values: Sequence[str]) -> list[tuple[str, int]]:
    """The label (``"Header: "``, or ``""``) and column of each value ``format_row`` keeps.

    For a parser that composes the row itself, e.g. to keep each value's characters apart.
    """
    pairs: list[tuple[str, int]] = []
    for column, (header, value) in enumerate(
        zip_longest(headers[: len(values)], values, fillvalue="")
    ):
        if not collapse(value):
            continue
        header = collapse(header)
        pairs.append((f"{header}{LABEL_SEPARATOR}" if header else "", column))
    return pairs


def collapse(text: str) -> str:
    """Collapse runs of whitespace to one space and trim the ends."""
    return " ".join(text.split())


def row_headers(text: str) -> tuple[str, ...] | None:
    """The column headers of a row as ``format_row`` wrote it, in order; None for text that
    does not read as a row of at least two labelled values.

    A sentence of prose may hold one "label: value" by chance; a row holds one per column, so
    its rows read back the same headers, which is how a reader of the text tells a table apart
    (``citewell.generate.tables``)."""
    pairs = text.strip().split(PAIR_SEPARATOR)
    if len(pairs) < 2:
        return None
    headers = []
    for pair in pairs:
        header, separator, value = pair.partition(LABEL_SEPARATOR)
        if not separator or not header.strip() or not value.strip() or len(header) > 60:
            return None
        headers.append(header.strip())
    return tuple(headers)
