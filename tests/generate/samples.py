"""Evidence built from plain sentences, for the tests of generators, markers and alignment."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from citewell.cite.evidence import build_evidence
from citewell.model import Chunk, Evidence, Passage, ScoreBreakdown, Source, Span, Turn


@dataclass(frozen=True)
class Doc:
    """A passage to pack as evidence: its sentences, and where it comes from."""

    sentences: Sequence[str]
    filename: str = "handbook.md"
    page: int | None = None
    headings: tuple[str, ...] = ()
    title: str | None = None
    effective_date: dt.date | None = None
    separator: str = " "
    """What joins its sentences: a space (one paragraph), or a blank line (each a block of its
    own, as ingest writes a list's items)."""


def evidence(
    question: str,
    docs: Sequence[Doc],
    *,
    language: str | None = "en",
    history: Sequence[Turn] = (),
    instructions: str | None = None,
) -> Evidence:
    """Evidence whose passages are ``docs``, each a source of its own."""
    passages: list[Passage] = []
    for index, doc in enumerate(docs):
        text, spans = "", []
        for sentence in doc.sentences:
            text += doc.separator if text else ""
            spans.append(Span(start=len(text), end=len(text) + len(sentence)))
            text += sentence
        source = Source(
            id=f"src_{index:04x}",
            bucket_id="bkt_1",
            filename=doc.filename,
            mime_type="text/markdown",
            content_hash="0" * 64,
            byte_size=len(text.encode()),
            version=1,
            title=doc.title,
            language=language,
            page_count=None if doc.page is None else doc.page,
            char_count=len(text),
            chunk_count=1,
            created_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
            effective_date=doc.effective_date,
        )
        chunk = Chunk(
            id=f"{source.id}:0",
            source_id=source.id,
            index=0,
            span=Span(start=0, end=len(text)),
            text=text,
            heading_path=doc.headings,
            page_numbers=() if doc.page is None else (doc.page,),
            sentences=tuple(spans),
            language=language,
        )
        passages.append(
            Passage(
                chunk=chunk,
                source=source,
                scores=ScoreBreakdown(fused=1.0),
                sentences=(),
                page_number=doc.page,
            )
        )
    return build_evidence(question, language, passages, history=history, instructions=instructions)


REFUNDS = Doc(
    [
        "Refunds are available within 30 days of purchase with a receipt.",
        "Gift cards cannot be refunded.",
    ],
    filename="refund_policy_2026.pdf",
    page=4,
)
SHIPPING = Doc(
    [
        "Shipping is free for orders over $50.",
        "Orders ship from our warehouse in Leeds within two business days.",
    ],
    filename="faq.md",
    headings=("FAQ", "Shipping"),
)


def shop_evidence(**kwargs: object) -> Evidence:
    """Four sentences from two sources: [1] refund window, [2] gift cards, [3] free shipping,
    [4] dispatch from Leeds."""
    return evidence("How long do I have to return something?", [REFUNDS, SHIPPING], **kwargs)  # type: ignore[arg-type]


def split_sentences(text: str) -> list[str]:
    """The sentences of one paragraph, as ingestion segments them."""
    from citewell.ingest.base import Block, BlockKind
    from citewell.ingest.segment import sentence_spans

    block = Block(BlockKind.PARAGRAPH, Span(start=0, end=len(text)), ())
    return [text[s.start : s.end] for s in sentence_spans(text, [block])]
