"""Claims and their citations, built up one claim at a time as an answer streams.

``Attribution`` turns (a claim's text, the evidence numbers it names) into kept citations:
numbers that name no evidence are dropped; adjacent sentences of one passage become one cited
range; each range is verified against the claim and kept only at or above the agent's
threshold (where it sets none, the verifier's own for the question's language); a claim that
names nothing, or only sentences that do not support it, is aligned with the evidence instead,
and one that aligns with nothing supported stays uncited — it never inherits a neighbour's
citation. Sources are numbered from 1 in order of first citation, at most
``agent.max_sources`` of them.
"""

from __future__ import annotations

from collections.abc import Sequence

from citewell.analysis import terms
from citewell.cite.align import align
from citewell.cite.regions import PageBoxes, regions
from citewell.cite.verify import Verifier
from citewell.events import ClaimResult
from citewell.locator import page_at
from citewell.model import (
    Agent,
    Citation,
    CitedSource,
    Claim,
    Evidence,
    EvidenceSentence,
    Span,
    Verdict,
)

__all__ = ["Attribution"]

_MIN_CLAIM_TERMS = 3
"""A claim with fewer content words that names no evidence is connective text ("In short,")."""
_ALIGNED_CITATIONS = 2
"""Most evidence sentences a fallback alignment may cite for one claim."""


class Attribution:
    def __init__(
        self,
        evidence: Evidence,
        agent: Agent,
        verifier: Verifier,
        pages: PageBoxes,
    ) -> None:
        self._evidence = evidence
        self._agent = agent
        self._verifier = verifier
        self._threshold = (
            verifier.threshold(evidence.language)
            if agent.support_threshold is None
            else agent.support_threshold
        )
        self._pages = pages
        self.claims: list[Claim] = []
        self.citations: list[Citation] = []
        self.sources: list[CitedSource] = []
        self.verdicts: list[Verdict] = []
        """Every candidate range judged for a claim of ``claims``, kept or dropped."""
        self._scores: dict[tuple[str, tuple[int, ...]], float] = {}
        """Support by (claim text, evidence numbers of the range)."""

    def attribute(self, text: str, span: Span, numbers: Sequence[int]) -> ClaimResult:
        """Decide the citations of the claim ``text`` at ``span`` of the answer."""
        claim_text = text[span.start : span.end]
        language = self._evidence.language
        cited = [self._by_number(n) for n in dict.fromkeys(numbers) if self._by_number(n)]
        index = len(self.claims)
        judged = _ranges([s for s in cited if s is not None])
        groups = self._verified(claim_text, judged, claim_index=index)
        if not groups:
            groups = self._verified(
                claim_text, self._aligned(claim_text, judged), claim_index=index
            )
        citations, new_sources = self._cite(index, groups)
        needs_citation = bool(numbers) or len(set(terms(claim_text, language))) >= _MIN_CLAIM_TERMS
        claim = Claim(span=span, supported=bool(citations), needs_citation=needs_citation)
        self.claims.append(claim)
        self.citations.extend(citations)
        self.sources.extend(new_sources)
        return ClaimResult(claim, tuple(citations), tuple(new_sources))

    def supports(self, claim_text: str, numbers: Sequence[int]) -> bool:
        """Whether the claim would keep a citation (strict agents decide before showing it)."""
        cited = [s for s in (self._by_number(n) for n in numbers) if s is not None]
        judged = _ranges(cited)
        if self._verified(claim_text, judged):
            return True
        return bool(self._verified(claim_text, self._aligned(claim_text, judged)))

    def _aligned(
        self, claim_text: str, judged: list[list[EvidenceSentence]]
    ) -> list[list[EvidenceSentence]]:
        """The evidence ranges that share the claim's words most, but none holding a sentence
        already judged: for a claim that names no sentence, or only sentences that do not support
        it (a model's marker on the wrong one), the sentence that states it is cited instead, if
        the verifier finds one. A sentence rejected for the claim is not offered again with its
        neighbours, whose words would carry it past the verifier."""
        rejected = {s.number for group in judged for s in group}
        aligned = align(claim_text, self._evidence, language=self._evidence.language)
        ranges = _ranges([self._by_number(n) for n, _ in aligned[:_ALIGNED_CITATIONS]])
        return [r for r in ranges if not rejected & {s.number for s in r}]

    def _by_number(self, number: int) -> EvidenceSentence | None:
        if 1 <= number <= len(self._evidence.sentences):
            return self._evidence.sentences[number - 1]
        return None

    def _verified(
        self,
        claim_text: str,
        groups: list[list[EvidenceSentence]],
        *,
        claim_index: int | None = None,
    ) -> list[tuple[list[EvidenceSentence], float]]:
        """The groups the verifier supports; with ``claim_index``, every verdict is recorded."""
        kept = []
        for group in groups:
            score = self._support(claim_text, group)
            passes = score >= self._threshold
            if passes:
                kept.append((group, score))
            if claim_index is not None:
                self.verdicts.append(self._verdict(claim_index, group, score, kept=passes))
        return kept

    def _support(self, claim_text: str, group: list[EvidenceSentence]) -> float:
        """The verifier's score, asked once per answer: a strict agent's ``supports`` judges
        the ranges that ``attribute`` judges again, and a model judge costs a request each."""
        key = (claim_text, tuple(s.number for s in group))
        if key not in self._scores:
            self._scores[key] = self._verifier.support(
                claim_text, [s.text for s in group], language=self._evidence.language
            )
        return self._scores[key]

    def _verdict(
        self, claim_index: int, group: list[EvidenceSentence], score: float, *, kept: bool
    ) -> Verdict:
        passage = self._evidence.passages[group[0].passage_index]
        return Verdict(
            claim_index=claim_index,
            chunk_id=passage.chunk.id,
            source_id=passage.source.id,
            span=Span(start=group[0].span.start, end=group[-1].span.end),
            support=round(min(max(score, 0.0), 1.0), 4),
            kept=kept,
        )

    def _cite(
        self, claim_index: int, groups: list[tuple[list[EvidenceSentence], float]]
    ) -> tuple[list[Citation], list[CitedSource]]:
        numbering = {s.source.id: s.source_index for s in self.sources}
        citations: list[Citation] = []
        new_sources: list[CitedSource] = []
        for group, score in groups:
            passage = self._evidence.passages[group[0].passage_index]
            source = passage.source
            if source.id not in numbering:
                if len(numbering) >= self._agent.max_sources:
                    continue
                numbering[source.id] = len(numbering) + 1
                new_sources.append(CitedSource(source_index=numbering[source.id], source=source))
            citations.append(self._citation(claim_index, numbering[source.id], group, score))
        citations.sort(key=lambda c: (c.source_index, c.span.start))
        return citations, new_sources

    def _citation(
        self, claim_index: int, source_index: int, group: list[EvidenceSentence], score: float
    ) -> Citation:
        passage = self._evidence.passages[group[0].passage_index]
        chunk = passage.chunk
        span = Span(start=group[0].span.start, end=group[-1].span.end)
        source_id = passage.source.id
        pages = self._pages.pages(source_id)
        page = page_at(pages, span.start)
        text = chunk.text[span.start - chunk.span.start : span.end - chunk.span.start]
        return Citation(
            claim_index=claim_index,
            source_index=source_index,
            source_id=source_id,
            chunk_id=chunk.id,
            span=span,
            cited_text=text,
            page_number=page.number if page else None,
            page_label=page.label if page else None,
            support=round(score, 4),
            conflict_side=self._evidence.conflict_side(s.number for s in group),
            regions=regions(
                pages,
                span,
                text,
                lambda number: self._pages.char_boxes(source_id, number),
                lambda number: self._pages.char_confidences(source_id, number),
            ),
        )


def _ranges(sentences: Sequence[EvidenceSentence | None]) -> list[list[EvidenceSentence]]:
    """Cited sentences grouped into runs that are adjacent within one passage."""
    ordered = sorted({s.number: s for s in sentences if s is not None}.values(), key=_order)
    groups: list[list[EvidenceSentence]] = []
    for sentence in ordered:
        last = groups[-1][-1] if groups else None
        if (
            last
            and last.passage_index == sentence.passage_index
            and last.number + 1 == sentence.number
        ):
            groups[-1].append(sentence)
        else:
            groups.append([sentence])
    return groups


def _order(sentence: EvidenceSentence) -> int:
    return sentence.number
