"""HTML read with selectolax (lexbor): the readable text of the page, block by block.

Decoding follows the browser's order, simplified: a byte-order mark, then ``<meta charset>``, then
UTF-8 with replacement characters. Page furniture (scripts, styles, navigation, forms, asides,
page headers and footers) is skipped; a ``<header>`` or ``<footer>`` inside an ``<article>``,
``<main>`` or ``<section>`` belongs to the content and is kept. Whitespace inside a block collapses
to single spaces, except in ``<pre>``. Table rows read ``Header: value; Header: value``.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from typing import Any

from selectolax.lexbor import LexborHTMLParser

from citewell.config import IngestSettings
from citewell.ingest.base import BlockKind, DocumentBuilder, ParsedDocument
from citewell.ingest.tables import collapse, format_row
from citewell.ingest.text import normalise_newlines, sniff_bom

__all__ = ["PARSER", "HtmlParser", "decode_html"]

Node = Any  # selectolax ships no type information

_SKIPPED = frozenset(
    {"head", "script", "style", "noscript", "template", "nav", "aside", "form", "svg", "math"}
    | {"iframe", "object", "embed", "canvas", "button", "select", "textarea", "dialog"}
)
_PAGE_FURNITURE = frozenset({"header", "footer"})
_CONTENT_ROOTS = frozenset({"article", "main", "section"})

# Elements that start a block of their own, and the kind of block their direct text forms.
_BLOCKS: dict[str, BlockKind] = {
    **{f"h{level}": BlockKind.HEADING for level in range(1, 7)},
    **dict.fromkeys(("li",), BlockKind.LIST_ITEM),
    **dict.fromkeys(("pre",), BlockKind.CODE),
    **dict.fromkeys(
        (
            "p", "blockquote", "dt", "dd", "figcaption", "caption", "div", "section", "article",
            "main", "address", "details", "summary", "center", "body", "header", "footer",
            "ul", "ol", "dl", "figure", "fieldset", "legend", "hr", "html",
        ),
        BlockKind.PARAGRAPH,
    ),
}  # fmt: skip

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
# What browsers actually use for labels that lie (HTML standard, "encoding sniffing").
_CHARSET_OVERRIDES = {
    "iso-8859-1": "cp1252",
    "latin-1": "cp1252",
    "latin1": "cp1252",
    "ascii": "cp1252",
    "us-ascii": "cp1252",
    "utf-16": "utf-8",
    "utf-16le": "utf-8",
    "utf-16be": "utf-8",
}


def decode_html(data: bytes) -> str:
    """Decode by BOM, else the ``<meta charset>`` of the first 4 KB, else UTF-8 (replacing)."""
    bom = sniff_bom(data)
    if bom is not None:
        encoding, skip = bom
        return normalise_newlines(data[skip:].decode(encoding, errors="replace"))
    encoding = "utf-8"
    match = _META_CHARSET.search(data[:4096])
    if match is not None:
        label = match.group(1).decode("ascii").lower()
        label = _CHARSET_OVERRIDES.get(label, label)
        try:
            encoding = codecs.lookup(label).name
        except LookupError:
            pass  # an unknown label: browsers fall back too
    return normalise_newlines(data.decode(encoding, errors="replace"))


def _is_skipped(node: Node, *, in_content: bool) -> bool:
    """Whether to leave out ``node`` and everything under it."""
    tag = node.tag
    if tag in _SKIPPED or tag == "-comment" or "hidden" in node.attributes:
        return True
    return tag in _PAGE_FURNITURE and not in_content


def _children(node: Node) -> Iterator[Node]:
    return node.iter(include_text=True)  # type: ignore[no-any-return]


def element_text(node: Node) -> str:
    """All visible text under ``node`` (skipped elements left out), whitespace collapsed."""
    parts: list[str] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.tag == "-text":
            parts.append(current.text_content or "")
        elif current is node or not _is_skipped(current, in_content=True):
            if current.tag in ("br", "p", "div", "li"):
                parts.append(" ")  # keep words of adjacent lines or blocks apart
            stack.extend(reversed(list(_children(current))))
    return collapse("".join(parts))


class _Collector:
    """Walks the DOM in document order, gathering inline text into the enclosing block."""

    def __init__(self, builder: DocumentBuilder) -> None:
        self.builder = builder
        self.parts: list[str] = []
        self.contexts: list[tuple[BlockKind, int | None]] = [(BlockKind.PARAGRAPH, None)]
        self.content_depth = 0  # open <article>, <main> and <section> elements
        self.first_h1: str | None = None

    def flush(self) -> None:
        kind, level = self.contexts[-1]
        raw = "".join(self.parts)
        self.parts.clear()
        text = raw if kind is BlockKind.CODE else collapse(raw)
        block = self.builder.add_block(kind, text, level=level)
        if block is not None and level == 1 and self.first_h1 is None:
            self.first_h1 = text

    def walk(self, root: Node) -> None:
        # An explicit stack instead of recursion: deeply nested pages must not overflow.
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            node, leaving = stack.pop()
            if leaving:
                self.leave(node)
            elif node.tag == "-text":
                self.parts.append(node.text_content or "")
            elif not _is_skipped(node, in_content=self.content_depth > 0):
                if self.enter(node):
                    stack.append((node, True))
                    stack.extend((child, False) for child in reversed(list(_children(node))))
        self.flush()

    def enter(self, node: Node) -> bool:
        """Handle an opening tag; False when the element was consumed whole."""
        tag = node.tag
        if tag == "table":
            self.flush()
            self.add_table(node)
            return False
        if tag == "br":
            self.parts.append("\n" if self.contexts[-1][0] is BlockKind.CODE else " ")
        kind = _BLOCKS.get(tag)
        if kind is not None:
            self.flush()
            level = int(tag[1]) if kind is BlockKind.HEADING else None
            if kind is BlockKind.PARAGRAPH and self.contexts[-1][0] is BlockKind.LIST_ITEM:
                kind = BlockKind.LIST_ITEM  # a <p> inside an <li> is still the list item
            self.contexts.append((kind, level))
        self.content_depth += tag in _CONTENT_ROOTS
        return True

    def leave(self, node: Node) -> None:
        self.content_depth -= node.tag in _CONTENT_ROOTS
        if node.tag in _BLOCKS:
            self.flush()
            self.contexts.pop()

    def add_table(self, table: Node) -> None:
        rows = list(_table_rows(table))
        if not rows:
            return
        header_rows = [cells for cells, in_head in rows if in_head]
        if header_rows:
            header, body = header_rows[-1], [cells for cells, in_head in rows if not in_head]
        else:
            header, body = rows[0][0], [cells for cells, _ in rows[1:]]
        if not body:  # a lone header row still holds text worth keeping
            header, body = [], [header]
        for cells in body:
            self.builder.add_block(BlockKind.TABLE_ROW, format_row(header, cells))


def _table_rows(table: Node) -> Iterator[tuple[list[str], bool]]:
    """Cell texts of each row of ``table`` (not of tables nested in it), aligned to columns by
    colspan, with whether the row is a header row (in ``<thead>`` or made only of ``<th>``)."""
    for section in _children(table):
        if section.tag in ("thead", "tbody", "tfoot"):
            rows = [row for row in _children(section) if row.tag == "tr"]
        elif section.tag == "tr":
            rows = [section]
        else:
            continue
        for row in rows:
            cells = [cell for cell in _children(row) if cell.tag in ("td", "th")]
            is_header = section.tag == "thead" or (
                bool(cells) and all(cell.tag == "th" for cell in cells)
            )
            texts: list[str] = []
            for cell in cells:
                span = cell.attributes.get("colspan") or "1"
                width = max(1, min(int(span) if span.isdigit() else 1, 1000))
                # A header spans its columns; a value is stated once, under its first column.
                text = element_text(cell)
                texts.extend([text] * width if is_header else [text] + [""] * (width - 1))
            yield texts, is_header


class HtmlParser:
    media_types: tuple[str, ...] = ("text/html",)

    def parse(self, data: bytes, *, filename: str, limits: IngestSettings) -> ParsedDocument:
        tree = LexborHTMLParser(decode_html(data))
        builder = DocumentBuilder()
        collector = _Collector(builder)
        if tree.root is not None:
            collector.walk(tree.root)
        title = tree.css_first("title")
        builder.title = (collapse(title.text()) if title is not None else "") or collector.first_h1
        return builder.build()


PARSER = HtmlParser()
