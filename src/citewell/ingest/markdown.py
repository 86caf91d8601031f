"""Markdown (CommonMark with tables) read with markdown-it-py.

The canonical text is what a reader sees, without markup: no ``#``, emphasis marks, backticks or
link targets; an image contributes its alt text. Soft and hard line breaks stay ``\\n``. Headings,
paragraphs, list items, code blocks and table rows become blocks; a block quote's paragraphs are
ordinary paragraphs. The title is the first level-1 heading.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from markdown_it import MarkdownIt
from markdown_it.token import Token
from selectolax.lexbor import LexborHTMLParser

from citewell.config import IngestSettings
from citewell.ingest.base import BlockKind, DocumentBuilder, ParsedDocument
from citewell.ingest.html import element_text
from citewell.ingest.tables import collapse, format_row
from citewell.ingest.text import decode_text

__all__ = ["PARSER", "MarkdownParser"]


def _content(token: Token) -> str:
    return token.content


def _newline(token: Token) -> str:
    return "\n"


# Inline tokens that carry readable text, and what they contribute.
_INLINE_TEXT: dict[str, Callable[[Token], str]] = {
    "text": _content,
    "code_inline": _content,
    "image": _content,  # an image token's content is its alt text
    "softbreak": _newline,
    "hardbreak": _newline,
}


def _md() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def inline_text(token: Token) -> str:
    """The readable text of an ``inline`` token: markup, link targets and raw HTML dropped."""
    parts: list[str] = []
    for child in token.children or ():
        render = _INLINE_TEXT.get(child.type)
        if render is not None:
            parts.append(render(child))
    return "".join(parts)


class _Walker:
    """Turns the flat token stream into blocks, tracking lists and tables on the way."""

    def __init__(self, builder: DocumentBuilder) -> None:
        self.builder = builder
        self.list_depth = 0
        self.heading_level: int | None = None
        self.table_row: list[str] | None = None
        self.table_header: list[str] = []
        self.in_thead = False

    def feed(self, tokens: Sequence[Token]) -> None:
        for token in tokens:
            handler = getattr(self, "on_" + token.type, None)
            if handler is not None:
                handler(token)

    def on_heading_open(self, token: Token) -> None:
        self.heading_level = int(token.tag[1:])

    def on_heading_close(self, token: Token) -> None:
        self.heading_level = None

    def on_list_item_open(self, token: Token) -> None:
        self.list_depth += 1

    def on_list_item_close(self, token: Token) -> None:
        self.list_depth -= 1

    def on_inline(self, token: Token) -> None:
        text = inline_text(token)
        if self.table_row is not None:
            self.table_row.append(text)
        elif self.heading_level is not None:
            block = self.builder.add_block(BlockKind.HEADING, text, level=self.heading_level)
            if block is not None and self.heading_level == 1 and self.builder.title is None:
                self.builder.title = collapse(text)
        else:
            kind = BlockKind.LIST_ITEM if self.list_depth else BlockKind.PARAGRAPH
            self.builder.add_block(kind, text)

    def on_fence(self, token: Token) -> None:
        self.builder.add_block(BlockKind.CODE, token.content)

    on_code_block = on_fence

    def on_html_block(self, token: Token) -> None:
        # Raw HTML inside Markdown: keep its visible text, as the HTML parser would.
        body = LexborHTMLParser(token.content).body
        self.builder.add_block(BlockKind.PARAGRAPH, element_text(body) if body else "")

    def on_thead_open(self, token: Token) -> None:
        self.in_thead = True

    def on_thead_close(self, token: Token) -> None:
        self.in_thead = False

    def on_tr_open(self, token: Token) -> None:
        self.table_row = []

    def on_tr_close(self, token: Token) -> None:
        row, self.table_row = self.table_row or [], None
        if self.in_thead:
            self.table_header = row
        else:
            self.builder.add_block(BlockKind.TABLE_ROW, format_row(self.table_header, row))

    def on_table_close(self, token: Token) -> None:
        self.table_header = []


class MarkdownParser:
    media_types: tuple[str, ...] = ("text/markdown",)

    def parse(self, data: bytes, *, filename: str, limits: IngestSettings) -> ParsedDocument:
        builder = DocumentBuilder()
        _Walker(builder).feed(_md().parse(decode_text(data, filename)))
        return builder.build()


PARSER = MarkdownParser()
