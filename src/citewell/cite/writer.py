"""An answer written from a generator's drafts: its text, claims and citations, as events.

The engine hands the writer what a generator drafts; the writer strips inline markers, settles
free text into claims sentence by sentence, has each claim attributed and verified, says plainly
when the sources do not answer, and finally makes the ``Answer``.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio.to_thread

from citewell.cite.attribute import Attribution
from citewell.cite.markers import MarkerStream
from citewell.events import (
    AnswerEvent,
    CitedSentence,
    ClaimDone,
    Declined,
    Draft,
    Question,
    TextDelta,
    TextPiece,
)
from citewell.ingest.base import Block, BlockKind
from citewell.ingest.segment import sentence_spans
from citewell.model import (
    Agent,
    Answer,
    Claim,
    Evidence,
    GroundingState,
    PartConflict,
    QuestionPart,
    ReadSentence,
    Span,
    Trace,
)

__all__ = ["PART_REFUSED", "REFUSALS", "AnswerWriter", "part_refusal"]

REFUSALS = {
    "en": "The available sources do not answer this question.",
    "es": "Las fuentes disponibles no responden a esta pregunta.",
    "zh": "现有资料无法回答这个问题。",
}
_PART_REFUSALS = {
    "en": "The available sources do not answer “{part}”",
    "es": "Las fuentes disponibles no responden a «{part}»",
    "zh": "现有资料无法回答“{part}”",
}
PART_REFUSED = re.compile(
    "|".join(
        re.escape(said).replace(re.escape("{part}"), "[^”»]*") for said in _PART_REFUSALS.values()
    )
)
"""Where an answer says that the sources do not answer one part of its question."""


def part_refusal(part: str, language: str | None) -> str:
    """What an answer says of a part of its question that the sources do not answer, so that an
    answer to the other parts is not taken for the whole answer."""
    said = _PART_REFUSALS.get(language or "en", _PART_REFUSALS["en"])
    return said.format(part=part.strip().replace("”", '"').replace("»", '"'))


@dataclass
class AnswerWriter:
    """Turns a generator's drafts into answer text, claims and citations, as events.

    Free text (``TextPiece``) is shown as it arrives, markers stripped, unless the agent is
    strict; its claims settle sentence by sentence, as soon as the text shows a sentence to be
    complete. A strict agent shows a sentence only once a citation supports it.

    Attribution runs in a worker thread: verifying a claim may mean asking a remote model.
    """

    evidence: Evidence
    agent: Agent
    attribution: Attribution
    text: str = ""
    declined: bool = False
    _pending: str = ""
    """Clean free text not yet settled into claims."""
    _received: int = 0
    """Clean free text received so far, settled or not (marker offsets count in it)."""
    _shown_from: int = 0
    """Where free text starts in ``text`` (only text is ever appended)."""

    async def write(self, drafts: AsyncIterator[Draft]) -> AsyncIterator[AnswerEvent]:
        markers = MarkerStream(len(self.evidence.sentences))
        async for draft in drafts:
            if isinstance(draft, Declined):
                self.declined = True
                break
            if isinstance(draft, CitedSentence):
                for event in await self._sentence(draft.text, draft.evidence):
                    yield event
            elif isinstance(draft, TextPiece):
                for event in await self._free(markers.feed(draft.text), markers):
                    yield event
            else:
                for event in self._remark(draft.text):
                    yield event
        for event in await self._free(markers.flush(), markers, final=True):
            yield event
        if self.declined or not any(c.supported for c in self.attribution.claims):
            for event in self._refusal():
                yield event

    async def _sentence(self, text: str, numbers: Sequence[int]) -> list[AnswerEvent]:
        """A sentence whose citations the generator named (possibly none)."""
        stripped = text.strip()
        if not stripped:
            return []
        if self.agent.strict:
            supports = self.attribution.supports
            if not await anyio.to_thread.run_sync(supports, stripped, numbers):
                return []
        start = len(self.text)
        self.text += text
        return [TextDelta(text), await self._claim(start, text, numbers)]

    async def _free(
        self, clean: str, markers: MarkerStream, *, final: bool = False
    ) -> list[AnswerEvent]:
        events: list[AnswerEvent] = []
        if not self.agent.strict and clean:
            if not self._pending and self._received == 0:
                self._shown_from = len(self.text)
            self.text += clean
            events.append(TextDelta(clean))
        base = self._received - len(self._pending)  # stream offset of _pending[0]
        self._received += len(clean)
        self._pending += clean
        spans = _sentences(self._pending)
        settled = 0
        for index in range(len(spans) if final else len(spans) - 1):
            last = index + 1 == len(spans)
            end = len(self._pending) if last else spans[index + 1].start
            numbers = markers.numbers_between(base + settled, base + end, inclusive=last and final)
            events.extend(await self._settle(self._pending[settled:end], base + settled, numbers))
            settled = end
        self._pending = self._pending[settled:]
        return events

    async def _settle(
        self, piece: str, stream_offset: int, numbers: Sequence[int]
    ) -> list[AnswerEvent]:
        if self.agent.strict:
            return await self._sentence(piece, numbers)
        return [await self._claim(self._shown_from + stream_offset, piece, numbers)]

    async def _claim(self, start: int, piece: str, numbers: Sequence[int]) -> ClaimDone:
        """Attribute ``piece``, which stands at ``start`` of the answer text.

        The claim is the piece without the spaces around it, nor a list marker before it: "1."
        is layout, and as a number it would fail verification against every source.
        """
        lead = _LEAD.match(piece)
        assert lead is not None  # the pattern matches the empty string
        end = len(piece.rstrip())
        span = Span(start=start + min(lead.end(), end), end=start + end)
        result = await anyio.to_thread.run_sync(
            self.attribution.attribute, self.text, span, numbers
        )
        return ClaimDone(len(self.attribution.claims) - 1, result)

    def _remark(self, text: str) -> list[AnswerEvent]:
        """Words that state nothing from the sources: a claim that needs no citation."""
        if not text.strip():
            return []
        lead = len(text) - len(text.lstrip())
        start = len(self.text)
        self.text += text
        span = Span(start=start + lead, end=start + len(text.rstrip()))
        self.attribution.claims.append(Claim(span=span, supported=False, needs_citation=False))
        return [TextDelta(text)]

    def _refusal(self) -> list[AnswerEvent]:
        """Say plainly that the sources do not answer, rather than leave a guess standing."""
        refusal = self.agent.refusal or REFUSALS.get(self.evidence.language or "en", REFUSALS["en"])
        self.declined = True
        separator = "\n\n" if self.text.strip() else ""
        start = len(self.text) + len(separator)
        self.text += separator + refusal
        span = Span(start=start, end=len(self.text))
        self.attribution.claims.append(Claim(span=span, supported=False, needs_citation=False))
        return [TextDelta(separator + refusal)]

    def answer(
        self, question: Question, agent: Agent, timings: dict[str, float], fingerprint: str
    ) -> Answer:
        attribution = self.attribution
        if not question.retrieve:
            grounding = GroundingState.NONE
        elif self.declined or not attribution.citations:
            grounding = GroundingState.MISSING
        elif not agent.show_sources:
            grounding = GroundingState.HIDDEN
        else:
            grounding = GroundingState.AVAILABLE
        return Answer(
            id=f"ans_{secrets.token_hex(12)}",
            agent=agent.name,
            question=question.text,
            text=self.text,
            claims=tuple(attribution.claims),
            citations=tuple(attribution.citations),
            sources=tuple(attribution.sources),
            passages=self.evidence.passages,
            grounding=grounding,
            declined=self.declined,
            created_at=datetime.now(UTC),
            trace=Trace(
                retrieved_chunk_ids=tuple(p.chunk.id for p in self.evidence.passages),
                cited_chunk_ids=tuple(dict.fromkeys(c.chunk_id for c in attribution.citations)),
                verdicts=tuple(attribution.verdicts),
                question_parts=tuple(
                    QuestionPart(
                        answerable=round(part.answerable, 4),
                        answered=part.answered,
                        conflict=(
                            None
                            if part.conflict is None
                            else PartConflict.located(self.evidence, part.conflict)
                        ),
                    )
                    for part in self.evidence.reading
                ),
                read_sentences=self._read_sentences(),
                timings_ms=timings,
                settings_fingerprint=fingerprint,
            ),
        )

    def _read_sentences(self) -> tuple[ReadSentence, ...]:
        sentences, passages = self.evidence.sentences, self.evidence.passages
        return tuple(
            ReadSentence(
                part=part,
                chunk_id=passages[sentences[number - 1].passage_index].chunk.id,
                span=sentences[number - 1].span,
                answers=round(score, 4),
            )
            for part, reading in enumerate(self.evidence.reading)
            for number, score in reading.answers
        )


_LEAD = re.compile(r"\s*(?:(?:\d{1,3}[.)]|[-*•+]|\(\d{1,3}\))[ \t]+)?")
"""Spaces and a list marker ("1.", "2)", "(3)", "-", "*", "•") that open a claim."""


def _sentences(text: str) -> list[Span]:
    """Sentence ranges of answer text: paragraphs split at blank lines, then blingfire."""
    blocks, start = [], 0
    for paragraph in text.split("\n\n"):
        end = start + len(paragraph)
        if paragraph.strip():
            blocks.append(Block(BlockKind.PARAGRAPH, Span(start=start, end=end), ()))
        start = end + 2
    return list(sentence_spans(text, blocks))
