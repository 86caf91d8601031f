"""A hand-made answer (two claims, two sources, the second claim citing both) and its events."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from citewell.events import AnswerEvent, ClaimDone, ClaimResult, Completed, Retrieved, TextDelta
from citewell.model import (
    Answer,
    Box,
    Chunk,
    Citation,
    CitedSource,
    Claim,
    GroundingState,
    PageRegion,
    Passage,
    ScoreBreakdown,
    SentenceMatch,
    Source,
    Span,
)

WHEN = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
FIRST = "Refunds are paid within thirty days."
SECOND = "Every bicycle carries a two-year warranty."
TEXT = f"{FIRST} {SECOND}"


def source(id_: str, filename: str, mime_type: str, text: str, pages: int | None) -> Source:
    return Source(
        id=id_,
        bucket_id="bkt_1",
        filename=filename,
        mime_type=mime_type,
        content_hash="0" * 64,
        byte_size=len(text),
        version=1,
        page_count=pages,
        char_count=len(text),
        chunk_count=1,
        created_at=WHEN,
    )


POLICY = source("src_policy", "refund_policy_2026.pdf", "application/pdf", FIRST, 4)
WARRANTY = source("src_warranty", "warranty.md", "text/markdown", SECOND, None)


def passage(of: Source, text: str, score: float, page: int | None) -> Passage:
    span = Span(start=0, end=len(text))
    chunk = Chunk(
        id=f"chk_{of.id}_0",
        source_id=of.id,
        index=0,
        span=span,
        text=text,
        heading_path=() if page else ("Warranty",),
        page_numbers=(page,) if page else (),
        sentences=(span,),
    )
    best = SentenceMatch(span=span, text=text, score=score, page_number=page)
    scores = ScoreBreakdown(fused=score)
    return Passage(chunk=chunk, source=of, scores=scores, sentences=(best,), page_number=page)


PASSAGES = (passage(POLICY, FIRST, 0.9, 4), passage(WARRANTY, SECOND, 0.5, None))


REGION = PageRegion(
    page_number=4, page_width=612, page_height=792, boxes=(Box(x0=72, y0=99, x1=306, y1=111.5),)
)
"""Where the policy's sentence lies on its page."""


def citation(claim: int, number: int, of: Passage) -> Citation:
    return Citation(
        claim_index=claim,
        source_index=number,
        source_id=of.source.id,
        chunk_id=of.chunk.id,
        span=of.chunk.span,
        cited_text=of.chunk.text,
        page_number=of.page_number,
        support=SUPPORT,
        regions=(REGION,) if of.page_number else (),
    )


class Links:
    """Links as the tests spell them: the server's path, then the source and what of it."""

    def __call__(self, source_id: str) -> str:
        return f"http://cw.example/v1/links/{source_id}"

    def page(self, source_id: str, page_number: int) -> str:
        return f"{self(source_id)}/p{page_number}"

    def highlight(self, source_id: str, page_number: int, span: Span) -> str:
        return f"{self.page(source_id, page_number)}/{span.start}-{span.end}"


link = Links()


def region_wire(*, linked: bool) -> dict[str, Any]:
    """``REGION`` of the policy's citation as every dialect sends it."""
    return {
        "page_number": 4,
        "page_label": None,
        "page_width": 612,
        "page_height": 792,
        "boxes": [
            {
                "x0": 72,
                "y0": 99,
                "x1": 306,
                "y1": 111.5,
                "nx0": 0.11765,
                "ny0": 0.125,
                "nx1": 0.5,
                "ny1": 0.14078,
            }
        ],
        "ocr_confidence": None,
        "image_url": link.page("src_policy", 4) if linked else None,
        "highlight_url": link.highlight("src_policy", 4, Span(start=0, end=len(FIRST)))
        if linked
        else None,
    }


SUPPORT = 0.75
"""The verifier's score of every citation here."""
CLAIMS = (
    Claim(span=Span(start=0, end=len(FIRST)), supported=True),
    Claim(span=Span(start=len(FIRST) + 1, end=len(TEXT)), supported=True),
)
CITATIONS = (
    citation(0, 1, PASSAGES[0]),
    citation(1, 1, PASSAGES[0]),
    citation(1, 2, PASSAGES[1]),
)
SOURCES = (CitedSource(source_index=1, source=POLICY), CitedSource(source_index=2, source=WARRANTY))


def make_answer(grounding: GroundingState = GroundingState.AVAILABLE) -> Answer:
    cited = grounding in (GroundingState.AVAILABLE, GroundingState.HIDDEN)
    return Answer(
        id="ans_1",
        agent="citewell-agent",
        question="How do refunds and warranties work?",
        text=TEXT,
        claims=CLAIMS,
        citations=CITATIONS if cited else (),
        sources=SOURCES if cited else (),
        passages=PASSAGES if grounding is not GroundingState.NONE else (),
        grounding=grounding,
        created_at=WHEN,
    )


def events_of(answer: Answer) -> list[AnswerEvent]:
    """The events the engine sends for ``answer``: a claim's citations after its last character."""
    first = ClaimResult(CLAIMS[0], answer.citations[:1], answer.sources[:1])
    second = ClaimResult(CLAIMS[1], answer.citations[1:], answer.sources[1:])
    return [
        Retrieved(answer.passages, answer.question),
        TextDelta("Refunds are paid "),
        TextDelta("within thirty days."),
        ClaimDone(0, first),
        TextDelta(f" {SECOND}"),
        ClaimDone(1, second),
        Completed(answer),
    ]


@pytest.fixture
def answer() -> Answer:
    return make_answer()
