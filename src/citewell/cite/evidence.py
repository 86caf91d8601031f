"""From retrieved passages to the numbered evidence sentences a generator reads.

Passages whose text is identical to a better-ranked one (the same document in two buckets, or
copied between files) are dropped first: they would split one fact's citations across copies.
"""

from __future__ import annotations

from collections.abc import Sequence

from citewell.model import Evidence, EvidenceSentence, Passage, Turn

__all__ = ["build_evidence", "distinct_passages", "is_heading"]


def distinct_passages(passages: Sequence[Passage], limit: int) -> tuple[Passage, ...]:
    """The best ``limit`` passages, without exact copies of a better-ranked one."""
    kept: list[Passage] = []
    seen: set[str] = set()
    for passage in passages:
        key = " ".join(passage.chunk.text.split())
        if key in seen:
            continue
        seen.add(key)
        kept.append(passage)
        if len(kept) == limit:
            break
    return tuple(kept)


def build_evidence(
    question: str,
    language: str | None,
    passages: Sequence[Passage],
    *,
    history: Sequence[Turn] = (),
    instructions: str | None = None,
) -> Evidence:
    """Every sentence of every passage, numbered from 1 in passage order."""
    sentences: list[EvidenceSentence] = []
    for index, passage in enumerate(passages):
        chunk = passage.chunk
        for span in chunk.sentences:
            text = chunk.text[span.start - chunk.span.start : span.end - chunk.span.start]
            sentences.append(EvidenceSentence(len(sentences) + 1, index, span, text))
    return Evidence(
        question=question,
        language=language,
        passages=tuple(passages),
        sentences=tuple(sentences),
        history=tuple(history),
        instructions=instructions,
    )


def is_heading(evidence: Evidence, sentence: EvidenceSentence) -> bool:
    """Whether the sentence is a heading of its passage or the title of its source: it names a
    topic and answers nothing."""
    passage = evidence.passages[sentence.passage_index]
    key = _normalised(sentence.text.strip().lstrip("#").strip())
    names = (*passage.chunk.heading_path, passage.source.title or "")
    return any(key == _normalised(name) for name in names if name)


def _normalised(text: str) -> str:
    return " ".join(text.split()).casefold()
