"""Documents that come with a request, as the evidence the engine reads and cites.

A request may bring its own evidence (Anthropic's ``document`` and ``search_result`` blocks)
instead of asking citewell to retrieve it. Each becomes one ephemeral source with one chunk (its
whole text) whose sentences are its citable units, and a ``Citable`` that says how a citation
into it is named on the wire:

==================  ========================================  ==========================
body                canonical text and citable units          cited as
==================  ========================================  ==========================
``TextBody``        the text exactly as given; its sentences  ``char_location``
``PdfBody``         citewell's PDF text; its sentences        ``page_location``
``BlocksBody``      the blocks joined with nothing between;   ``content_block_location``
                    each block one unit, never split          (``search_result_location``
                                                              for search results)
==================  ========================================  ==========================

Offsets are code points of the canonical text, start inclusive, end exclusive; pages 1-based.
Nothing here is stored: the sources live as long as the request.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from citewell.config import IngestSettings
from citewell.errors import IngestError, InvalidRequest
from citewell.events import Citable, Given
from citewell.ingest import parse
from citewell.ingest.base import Block, BlockKind
from citewell.ingest.ocr import Ocr
from citewell.ingest.segment import sentence_spans
from citewell.ingest.text import split_paragraphs
from citewell.language import detect_language
from citewell.model import Chunk, Page, Passage, ScoreBreakdown, Source, Span

__all__ = [
    "BlocksBody",
    "GivenDocuments",
    "PdfBody",
    "RequestDocument",
    "RequestSearchResult",
    "TextBody",
    "decode_pdf",
    "given_documents",
]


@dataclass(frozen=True, slots=True)
class TextBody:
    """Plain text: cited by character range, sentence by sentence."""

    text: str


@dataclass(frozen=True, slots=True)
class PdfBody:
    """The bytes of a PDF: cited by page range, sentence by sentence."""

    data: bytes


@dataclass(frozen=True, slots=True)
class BlocksBody:
    """Text blocks, each one citable unit (custom content, a search result's content)."""

    blocks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RequestDocument:
    """A ``document`` block: ``index`` is its ``document_index`` (over the whole request)."""

    index: int
    body: TextBody | PdfBody | BlocksBody
    title: str | None = None
    context: str | None = None
    """Shown to the generator, never cited."""
    cite: bool = False
    file_id: str | None = None
    """The Files API id the document came from, echoed in its citations."""
    param: str = "messages"
    """Where the block stands in the request, for error messages."""


@dataclass(frozen=True, slots=True)
class RequestSearchResult:
    """A ``search_result`` block: ``index`` is its ``search_result_index``."""

    index: int
    source: str
    title: str | None
    blocks: tuple[str, ...]
    cite: bool = False


@dataclass(frozen=True, slots=True)
class GivenDocuments:
    given: Given
    citables: dict[str, Citable] = field(default_factory=dict)
    """By chunk id."""
    notes: str | None = None
    """Titles and contexts, for the generator's instructions."""


def decode_pdf(data: str, *, param: str) -> bytes:
    """The bytes of a base64 PDF; ``InvalidRequest`` when it is not base64 or not a PDF."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest(
            f"{param}: the data is not valid base64.", param=f"{param}.data"
        ) from None
    if not raw.lstrip(b"\t\n\r ").startswith(b"%PDF-"):
        raise InvalidRequest(
            f"{param}: the data is not a PDF document.", param=f"{param}.media_type"
        )
    return raw


def given_documents(
    items: Sequence[RequestDocument | RequestSearchResult],
    *,
    limits: IngestSettings,
    ocr: Ocr | None = None,
) -> GivenDocuments:
    """The passages and pages of a request's documents and search results, in request order.

    ``ocr`` reads the pages of scanned PDFs (which Anthropic's own API cannot cite)."""
    passages: list[Passage] = []
    pages: dict[str, tuple[Page, ...]] = {}
    citables: dict[str, Citable] = {}
    notes: list[str] = []
    for item in items:
        if isinstance(item, RequestSearchResult):
            source_id = f"src_search_result_{item.index}"
            text, units = _joined(item.blocks)
            passage = _passage(source_id, item.title or item.source, "text/plain", text, units)
            citables[passage.chunk.id] = Citable(
                kind="search_result_location",
                index=item.index,
                title=item.title,
                cite=item.cite,
                source=item.source,
                units=units,
            )
            notes.append(f"Search result {item.index}: {item.title or item.source}")
        else:
            source_id = f"src_document_{item.index}"
            passage, citable, doc_pages = _document(source_id, item, limits, ocr)
            citables[passage.chunk.id] = citable
            if doc_pages:
                pages[source_id] = doc_pages
            if item.title or item.context:
                line = f"Document {item.index}: {item.title or '(untitled)'}"
                notes.append(line + (f". {item.context}" if item.context else ""))
        passages.append(passage)
    return GivenDocuments(
        Given(tuple(passages), pages), citables, "\n".join(notes) if notes else None
    )


def _document(
    source_id: str, item: RequestDocument, limits: IngestSettings, ocr: Ocr | None
) -> tuple[Passage, Citable, tuple[Page, ...]]:
    name = item.title or f"document {item.index}"
    body = item.body
    base = Citable(
        kind="char_location",
        index=item.index,
        title=item.title,
        cite=item.cite,
        file_id=item.file_id,
    )
    if isinstance(body, BlocksBody):
        text, units = _joined(body.blocks)
        passage = _passage(source_id, name, "text/plain", text, units)
        return passage, replace(base, kind="content_block_location", units=units), ()
    if isinstance(body, TextBody):
        text = body.text
        passage = _passage(source_id, name, "text/plain", text, _text_sentences(text))
        return passage, base, ()
    try:
        parsed = parse(
            body.data,
            filename=item.title or "document.pdf",
            limits=limits,
            media_type="application/pdf",
            ocr=ocr,
        )
    except IngestError as exc:
        raise InvalidRequest(f"{item.param}: {exc.message}", param=item.param) from None
    sentences = sentence_spans(parsed.text, parsed.blocks)
    passage = _passage(
        source_id, name, "application/pdf", parsed.text, sentences, pages=parsed.pages
    )
    citable = replace(base, kind="page_location", pages=parsed.pages)
    return passage, citable, parsed.pages


def _joined(blocks: Sequence[str]) -> tuple[str, tuple[Span, ...]]:
    """The blocks' text joined with nothing between (as ``cited_text`` joins them), and the
    range of each."""
    spans, start = [], 0
    for block in blocks:
        spans.append(Span(start=start, end=start + len(block)))
        start += len(block)
    return "".join(blocks), tuple(spans)


def _text_sentences(text: str) -> tuple[Span, ...]:
    """Sentences of plain text as given: paragraphs at blank lines, then sentences."""
    blocks, start = [], 0
    for separator, paragraph in split_paragraphs(text):
        start += len(separator)
        blocks.append(Block(BlockKind.PARAGRAPH, Span(start=start, end=start + len(paragraph)), ()))
        start += len(paragraph)
    return sentence_spans(text, blocks)


def _passage(
    source_id: str,
    name: str,
    mime_type: str,
    text: str,
    units: Sequence[Span],
    *,
    pages: Sequence[Page] = (),
) -> Passage:
    language = detect_language(text)
    source = Source(
        id=source_id,
        bucket_id="request",
        filename=name,
        mime_type=mime_type,
        content_hash=hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
        byte_size=len(text.encode("utf-8", "surrogatepass")),
        version=1,
        language=language,
        page_count=len(pages) or None,
        char_count=len(text),
        chunk_count=1,
        created_at=dt.datetime.now(dt.UTC),
    )
    chunk = Chunk(
        id=f"{source_id}:0",
        source_id=source_id,
        index=0,
        span=Span(start=0, end=len(text)),
        text=text,
        page_numbers=tuple(p.number for p in pages),
        # Empty units hold nothing to cite (a block index still counts them).
        sentences=tuple(u for u in units if u.end > u.start),
        language=language,
    )
    return Passage(
        chunk=chunk,
        source=source,
        scores=ScoreBreakdown(fused=1.0),
        sentences=(),
        page_number=pages[0].number if pages else None,
        page_label=pages[0].label if pages else None,
    )
