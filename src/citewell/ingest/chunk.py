"""Chunks: runs of whole sentences inside one section, sized for retrieval.

Blocks are packed greedily, in order, up to ``max_words`` (Han characters count as half a word,
see ``citewell.language.count_words``). A chunk

- never splits a sentence, and a single sentence over the budget is a chunk of its own;
- never crosses a change of section: a heading opens a new chunk and is its first text;
- never mixes table rows or records with prose, so a retrieved table stays a table;
- splits a block over the budget at sentence boundaries.

A heading directly followed by a sub-heading opens one chunk with it (a heading-only chunk would
be retrieved for its title words and hold nothing to cite).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum, auto

from citewell.ingest.base import Block, BlockKind, ParsedDocument
from citewell.language import count_words, detect_language
from citewell.model import ChunkDraft, Page, Span

__all__ = ["chunk_document", "chunk_text_for_embedding"]

_TABULAR = frozenset({BlockKind.TABLE_ROW, BlockKind.RECORD})


class _Kind(Enum):
    """What a chunk holds besides headings; prose and tabular blocks never share a chunk."""

    PROSE = auto()
    TABULAR = auto()


@dataclass
class _Unit:
    """One block with its sentences and their word counts."""

    block: Block
    sentences: list[Span]
    words: list[float]


@dataclass
class _Open:
    """The chunk being filled."""

    path: tuple[str, ...]
    kind: _Kind | None = None
    """None while the chunk holds headings only."""
    sentences: list[Span] = field(default_factory=list)
    words: float = 0.0

    def add(self, sentence: Span, words: float) -> None:
        self.sentences.append(sentence)
        self.words += words


def chunk_document(
    doc: ParsedDocument, sentences: Sequence[Span], *, max_words: int
) -> tuple[ChunkDraft, ...]:
    """Pack the document's sentences into chunks, in order; each sentence lands in one chunk.

    ``sentences`` must be ordered, non-overlapping and each inside one block of ``doc`` (as
    ``segment.sentence_spans`` returns them); raises ValueError otherwise.
    """
    units = _units(doc, sentences)
    pages = _PageIndex(doc.pages)
    return tuple(
        ChunkDraft(
            span=(span := Span(start=chunk.sentences[0].start, end=chunk.sentences[-1].end)),
            heading_path=chunk.path,
            page_numbers=pages.touched(span),
            sentences=tuple(chunk.sentences),
            language=detect_language(doc.text[span.start : span.end]),
        )
        for chunk in _pack(doc.text, units, max_words)
    )


def chunk_text_for_embedding(text: str, heading_path: Sequence[str]) -> str:
    """The text to embed for a chunk: its section's headings on a first line, then its text.

    Embedding models retrieve better with the section as context. Headings the chunk already
    opens with (as lines of their own) are not repeated. ``text`` is the chunk's own text.
    """
    for depth in range(len(heading_path)):
        if _opens_with(text, heading_path[depth:]):
            heading_path = heading_path[:depth]
            break
    return "\n".join([" > ".join(heading_path), text]) if heading_path else text


def _opens_with(text: str, headings: Sequence[str]) -> bool:
    """Whether ``text`` starts with these headings, each ending a line (any spacing)."""
    words = [re.escape(word) for heading in headings for word in heading.split()]
    return bool(words) and re.match(r"\s+".join(words) + r"[^\S\n]*(?:\n|$)", text) is not None


def _units(doc: ParsedDocument, sentences: Sequence[Span]) -> list[_Unit]:
    """Each non-empty block with its sentences, in order."""
    units: list[_Unit] = []
    blocks = iter(doc.blocks)
    block = next(blocks, None)
    previous_end = 0
    for sentence in sentences:
        if sentence.start < previous_end:
            raise ValueError(f"sentence {sentence} overlaps or precedes the one before")
        previous_end = sentence.end
        while block is not None and block.span.end <= sentence.start:
            block = next(blocks, None)
        if block is None or not block.span.contains(sentence):
            raise ValueError(f"sentence {sentence} does not lie inside one block")
        if not units or units[-1].block is not block:
            units.append(_Unit(block, [], []))
        units[-1].sentences.append(sentence)
        units[-1].words.append(count_words(doc.text[sentence.start : sentence.end]))
    return units


def _pack(text: str, units: Iterable[_Unit], max_words: int) -> list[_Open]:
    """Fill chunks block by block; the last chunk of the list is the one being filled."""
    chunks: list[_Open] = []
    for unit in units:
        block = unit.block
        last = chunks[-1] if chunks else None
        if block.kind is BlockKind.HEADING:
            path = (*block.heading_path, " ".join(text[block.span.start : block.span.end].split()))
            if last is not None and last.kind is None and last.path == block.heading_path:
                last.path = path  # a sub-heading right under its heading: one chunk
            else:
                chunks.append(_Open(path))
        else:
            kind = _Kind.TABULAR if block.kind in _TABULAR else _Kind.PROSE
            if _needs_new_chunk(last, block, kind, sum(unit.words), max_words):
                chunks.append(_Open(block.heading_path))
            chunks[-1].kind = kind
        _fill(chunks, unit, max_words)
    return chunks


def _needs_new_chunk(
    last: _Open | None, block: Block, kind: _Kind, words: float, max_words: int
) -> bool:
    """Whether a block must open a chunk rather than join the last one."""
    if last is None or last.path != block.heading_path:
        return True  # a new section
    if last.kind is None:
        return False  # the block joins the heading that opened the chunk
    return last.kind is not kind or last.words + words > max_words


def _fill(chunks: list[_Open], unit: _Unit, max_words: int) -> None:
    """Add a block's sentences to the last chunk, opening another whenever the budget is spent."""
    for sentence, words in zip(unit.sentences, unit.words, strict=True):
        last = chunks[-1]
        if last.sentences and last.words + words > max_words:
            chunks.append(_Open(last.path, last.kind))
        chunks[-1].add(sentence, words)


class _PageIndex:
    """Finds the pages a range touches, by binary search over the ordered page ranges."""

    def __init__(self, pages: Sequence[Page]) -> None:
        self._pages = sorted(pages, key=lambda page: page.span.start)
        self._starts = [page.span.start for page in self._pages]
        self._ends = [page.span.end for page in self._pages]

    def touched(self, span: Span) -> tuple[int, ...]:
        first = bisect_right(self._ends, span.start)
        last = bisect_left(self._starts, span.end)
        return tuple(
            sorted(page.number for page in self._pages[first:last] if page.span.overlaps(span))
        )
