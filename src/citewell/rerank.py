"""The reader reads the evidence before any generator does.

    question → its parts → each part's candidate sentences → the reader's P(answers) for each
    → each part answerable or not → passages reordered, best-read first

A question may ask two things ("How much is a membership, and when is the workshop open?"): each
part is read on its own, so the sentence that answers the second is not outranked by the first
one's answer, and the answer can hold one for each. Reading costs one pass of the network per
(part, sentence) pair, so only the ``candidates`` sentences per part that word overlap ranks
highest are read (the network then decides among them), and may be read in two stages: the best
``read_first`` distinct statements first (a near-copy of one, from another version of the same
paragraph, waits), and the rest only where those leave the part unanswered, so a part its best
few sentences answer costs that many passes, and one about to be declined is read further
first; a part one of whose candidates another source contradicts is read all at once, so that
what the sources disagree on is found as if every part were. Headings are never read, as they
name a topic and answer nothing.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from citewell.cite.evidence import build_evidence, is_heading
from citewell.conflicts import find_conflict, one_statement
from citewell.generate.extractive import ExtractiveGenerator
from citewell.language import is_cjk
from citewell.model import Conflict, DeclineRule, Evidence, EvidenceSentence, PartReading
from citewell.read import Reader
from citewell.read.lexical import LexicalReader

__all__ = ["context_of", "question_parts", "read_evidence"]

_WORD_OVERLAP = ExtractiveGenerator()
"""Whose answer to a part the decline rule asks about: the extractive generator's lexical
choice, the judge the rule was fitted beside (``read.training.decline``)."""
CONFLICT_READ = 8
"""A part's best answers that another source may contradict (those read at least an eighth as
likely to answer as the best): each is compared with every sentence of the other sources. On
`citewell eval conflicts` (docs/benchmarks.md), comparing the best two at half the best's
score found 69 % of the planted disagreements, the best eight at an eighth 78 %, with no false
one either way: the reader's pick is often not the sentence the sources disagree on."""


def read_evidence(
    evidence: Evidence,
    reader: Reader,
    *,
    candidates: int,
    read_first: int | None = None,
    threshold: float | None = None,
    conflicts: bool = True,
) -> Evidence:
    """The evidence with the reader's ``reading`` of each question part, its passages reordered
    by the best score any of their sentences got (retrieval order among equals), and how the
    reader's card chooses a part's sentence in its language; with ``conflicts``, each part's
    disagreement between sources, if any.

    A part is answered where its answerability reaches ``threshold``, or without one, the
    reader's decline rule for the language: a lower threshold where word overlap would answer
    the part too (``model.DeclineRule``). ``read_first``: how many distinct statements of the
    ``candidates`` are read before the others (None: all at once)."""
    readable = [s for s in evidence.sentences if not is_heading(evidence, s)]
    if not readable:
        return evidence
    rule = (
        reader.decline_rule(evidence.language)
        if threshold is None
        else DeclineRule.single(threshold)
    )
    stages = sorted({min(read_first or candidates, candidates), candidates})
    readings = [
        _read_part(part, readable, evidence, reader, stages=stages, rule=rule, conflicts=conflicts)
        for part in question_parts(evidence.question)
    ]
    read = _reordered(evidence, readings)
    return dataclasses.replace(read, choice=reader.sentence_choice(evidence.language))


def _read_part(
    part: str,
    readable: Sequence[EvidenceSentence],
    evidence: Evidence,
    reader: Reader,
    *,
    stages: Sequence[int],
    rule: DeclineRule,
    conflicts: bool,
) -> PartReading:
    """The part read over word overlap's best ``stages[0]`` distinct statements, then its best
    ``stages[1]`` sentences if those leave it unanswered (the reader remembers the pairs it has
    read); with ``conflicts``, where sources disagree on it.

    A part whose candidates another source contradicts is read all at once: which of the
    candidates is the best answer, and so what the disagreement is about, is then the reader's
    choice among all of them, as when every part is read at once."""
    overlap = LexicalReader().score_answers(part, [s.text for s in readable])
    ranked = [readable[i] for i in sorted(range(len(readable)), key=lambda i: (-overlap[i], i))]
    *first, last = stages
    best = ranked[:last]
    # Read in stages, whether another source contradicts a candidate is asked before reading:
    # where none is, nothing read of them is either, however far the part is read.
    may_disagree = conflicts and (
        not first or find_conflict(evidence, [s.number for s in best]) is not None
    )
    if not may_disagree:
        for stage in first:
            reading = _read_best(part, _distinct(best, stage), evidence, reader, rule)
            if reading.answered:
                return reading
    reading = _read_best(part, best, evidence, reader, rule)
    if may_disagree:
        return dataclasses.replace(reading, conflict=_conflict(evidence, reading))
    return reading


def _distinct(ranked: Sequence[EvidenceSentence], count: int) -> list[EvidenceSentence]:
    """The best ``count`` sentences that are each a statement of their own: a near-copy of one
    chosen (another version of the paragraph, another document quoting it) says nothing new."""
    chosen: list[EvidenceSentence] = []
    for sentence in ranked:
        if not any(one_statement(sentence.text, other.text) for other in chosen):
            chosen.append(sentence)
            if len(chosen) == count:
                break
    return chosen


def _read_best(
    part: str,
    read: Sequence[EvidenceSentence],
    evidence: Evidence,
    reader: Reader,
    rule: DeclineRule,
) -> PartReading:
    texts = [s.text for s in read]
    contexts = [context_of(evidence, s) for s in read]
    scores = reader.score_answers(part, texts, contexts)
    answerable = reader.answerability(part, texts, contexts)
    answers = sorted(
        ((s.number, float(score)) for s, score in zip(read, scores, strict=True)),
        key=lambda pair: (-pair[1], pair[0]),
    )
    # Word overlap is asked only where its answer decides: between the rule's two thresholds.
    undecided = rule.worded <= answerable < rule.unworded
    worded = undecided and _WORD_OVERLAP.word_choice(evidence, part).sure
    return PartReading(part, answerable, rule.answers(answerable, worded=worded), tuple(answers))


def _conflict(evidence: Evidence, reading: PartReading) -> Conflict | None:
    """Where sources disagree on the part: its best answers, each in another source's version."""
    best = reading.answers[0][1] if reading.answers else 0.0
    anchors = [n for n, score in reading.answers[:CONFLICT_READ] if score > 0 and score >= best / 8]
    return find_conflict(evidence, anchors)


def context_of(evidence: Evidence, sentence: EvidenceSentence) -> str:
    """What the sentence is part of, as the reader was trained to read it: its source's title,
    then its section's headings."""
    passage = evidence.passages[sentence.passage_index]
    names = (passage.source.title or "", *passage.chunk.heading_path)
    return ": ".join(dict.fromkeys(name for name in names if name))  # a title is often the h1


def _reordered(evidence: Evidence, readings: Sequence[PartReading]) -> Evidence:
    """The evidence rebuilt with its passages best-read first, each reading's sentence numbers
    moved with them."""
    best = [-1.0] * len(evidence.passages)
    for reading in readings:
        for number, score in reading.answers:
            index = evidence.sentences[number - 1].passage_index
            best[index] = max(best[index], score)
    order = sorted(range(len(evidence.passages)), key=lambda i: (-best[i], i))
    rebuilt = build_evidence(
        evidence.question,
        evidence.language,
        [evidence.passages[i] for i in order],
        history=evidence.history,
        instructions=evidence.instructions,
    )
    position = {old: new for new, old in enumerate(order)}
    numbered = {(s.passage_index, s.span.start): s.number for s in rebuilt.sentences}

    def renumbered(old: int) -> int:
        sentence = evidence.sentences[old - 1]
        return numbered[(position[sentence.passage_index], sentence.span.start)]

    moved = tuple(
        dataclasses.replace(
            r,
            answers=tuple((renumbered(n), score) for n, score in r.answers),
            conflict=None
            if r.conflict is None
            else dataclasses.replace(
                r.conflict,
                preferred=renumbered(r.conflict.preferred),
                other=renumbered(r.conflict.other),
            ),
        )
        for r in readings
    )
    return dataclasses.replace(rebuilt, reading=moved)


_EN_ASKING = (
    r"what|when|where|who|whom|whose|which|why|how|do|does|did|is|are|was|were|can|could|will"
    r"|would|should|has|have|had"
)
_ES_ASKING = (
    r"qué|cuándo|cuánto|cuánta|cuántos|cuántas|dónde|adónde|quién|quiénes|cuál|cuáles|cómo"
    r"|por qué|para qué|es|son|hay|puede|pueden|existe|existen"
)
_JOINED = re.compile(
    rf"(?:,?\s+and\s+(?=(?:{_EN_ASKING})\b)|,?\s+y\s+(?=¿|(?:{_ES_ASKING})\b))",
    re.IGNORECASE,
)
"""Where one question is joined to another by "and" / "y": the conjunction before a second
interrogative ("... cost and when is it open?"), not one between two nouns ("Tom and Jerry")."""
_ASKED = re.compile(
    r"(?<=[?？])\s*(?=\S)|(?<=[。；;])\s*(?=\S)"
    r"|(?<=\.)\s+(?=(?:And|Also)\b)|\s+(?=¿\s*[Yy]\b)"
    r"|[，,]?\s*(?=(?:另外|此外)[，,])|(?:，|,\s*)(?=另外|此外|还有|以及)"
)
"""Where one question ends and another begins: after a question mark; after a full stop where a
conjunction opens the next ("Name a cause. And when ...?"); before a "¿Y" that opens one
however the first ended; before a Chinese "besides" that opens a second question, with or
without a comma or a question mark before it (people leave them out: "包是怎样路由的另外，...")."""
_OPENER = re.compile(
    r"^(?:(¿)\s*y\b[,\s]*|(?:and|also|y|además)\b[,\s]*|(?:另外|此外|还有|以及)[，,]?)",
    re.IGNORECASE,
)
"""A conjunction that opens a second question ("And when ...?", "¿Y cuándo ...?", "另外，")."""


def question_parts(question: str) -> tuple[str, ...]:
    """The things the question asks, in its order: the whole question when it asks one."""
    parts = []
    for asked in _ASKED.split(question.strip()):
        for piece in _JOINED.split(asked):
            part = _OPENER.sub(lambda opener: opener.group(1) or "", piece.strip()).strip()
            if _substantial(part):
                parts.append(part)
            elif parts:
                parts[-1] = f"{parts[-1]} {piece.strip()}"
    if len(parts) < 2:
        return (question,)
    return tuple(_punctuated(part, question) for part in parts)


def _substantial(part: str) -> bool:
    """Whether a piece asks something on its own: two words, or three Chinese characters."""
    return len(part.split()) >= 2 or (len(part) >= 3 and any(is_cjk(c) for c in part))


def _punctuated(part: str, question: str) -> str:
    """The part marked as a question the way the whole one is ("¿...?"), as the reader was
    trained on whole questions."""
    end = question.rstrip()[-1:]
    if end in "?？" and part[-1] not in "?？.。":
        part += end
    if question.lstrip().startswith("¿") and not part.startswith("¿"):
        part = "¿" + part
    opening = 1 if part.startswith("¿") else 0
    return part[:opening] + part[opening : opening + 1].upper() + part[opening + 1 :]
