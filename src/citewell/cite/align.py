"""Which evidence sentences an uncited answer sentence restates, found by the words they share.

A model that writes a sentence without a marker may still be restating the evidence. This finds
the evidence sentences it restates, so the engine can offer them for verification; a sentence
that restates nothing gets nothing. It never borrows a neighbouring sentence's citation: each
evidence sentence is judged on the words it shares with this one sentence, alone.

The score of an evidence sentence is the share of the answer sentence's content it holds: the
answer's terms (``citewell.analysis.terms``: stemmed, stopwords dropped, Chinese segmented) found
in it, each weighted by its rarity across the evidence, over the weight of all the answer's
terms. A term every evidence sentence holds says little; a term only one holds says which.
Two things must agree outright, whatever the words: every number of the answer sentence must
stand in the evidence sentence ("30 days" does not restate "14 days"), and every capitalised name
must stand in it or elsewhere in its passage (a pronoun may stand for a name the passage gives).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass

from citewell.analysis import terms
from citewell.cite.numbers import numbers
from citewell.model import Evidence, EvidenceSentence

__all__ = ["ALIGN_THRESHOLD", "MIN_SHARED_TERMS", "Aligner", "align"]

ALIGN_THRESHOLD = 0.5
"""Least share of an answer sentence's weighted terms an evidence sentence must hold.

Half: a sentence that restates another carries most of its content words, and one that merely
shares a topic does not. On ClapNQ's human-written answers (tests/cite/test_align.py describes the
measurement), sentences scored against the passage they were written from, their best match
clears 0.5 for most, while against an unrelated passage of the same data set no sentence does;
within the right passage, the sentences the annotators did not select rarely do."""

MIN_SHARED_TERMS = 2
"""Least number of distinct terms shared: one common word is a coincidence, not a restatement."""

_UNSEEN_WEIGHT = 1.0
"""Weight of an answer term no evidence sentence holds, as a share of the rarest term's weight.

Such a term is the model's own wording or content from outside the evidence; it counts against
every evidence sentence alike, as much as the rarest evidence term. In the ClapNQ measurement
(tests/cite/test_align.py) the weight matters little between 0.25 and 2: 10 instead of 9
unselected sentences aligned at 0.5, 7 at 2 (with 3 fewer answer sentences matched); at 0, two
answer sentences aligned with an unrelated passage."""

_FUNCTION_WORDS = {
    "en": "i me my we our us you your he him his she her its them their what which who whom "
    "this those am were been being have has had do does did can could would should may might "
    "must shall about after before from into over under up down out than too very also just "
    "only so any all each both some more most other such here when where why how within",
    "es": "yo me mi mis tu tus te él ella ellos ellas nos nuestro nuestra usted ustedes lo le les "
    "su sus este esta estos estas ese esa eso del al con sin sobre entre hasta desde durante "
    "puede pueden ser es son fue era está están hay tiene tienen más muy también cuando donde "
    "como pero porque",
}
"""Words the analyzers keep (their stopword lists are short) but that say nothing of what a
sentence is about: shared, they would make "our team answers within two days" restate "our
orders ship within two days". Chinese function words are already dropped by the analyzer."""

_PAIR_PART = 0.2
"""Least share of an answer sentence each of a pair of evidence sentences must add."""

_WORD = re.compile(r"[^\W\d_][\w'’-]*")
_SENTENCE_END = re.compile(r"[.!?。！？:]\s*$")


@dataclass(frozen=True, slots=True)
class _Answer:
    terms: frozenset[str]
    numbers: frozenset[str]
    names: frozenset[str]


@dataclass(frozen=True, slots=True)
class _Analysed:
    terms: frozenset[str]
    numbers: frozenset[str]
    names_text: str
    """Where the sentence's names may be found, casefolded: the sentence, its passage, titles."""


class Aligner:
    """Aligns answer sentences with one evidence, analysed once."""

    def __init__(self, evidence: Evidence, *, language: str | None) -> None:
        self.evidence = evidence
        self.language = language
        passages = [_passage_text(evidence, s) for s in evidence.sentences]
        self._sentences = [
            _Analysed(
                _content_terms(s.text, language), numbers(s.text), f"{s.text}\n{p}".casefold()
            )
            for s, p in zip(evidence.sentences, passages, strict=True)
        ]
        frequency = Counter(t for s in self._sentences for t in s.terms)
        count = len(self._sentences)
        self._weight = {t: math.log(1 + count / df) for t, df in frequency.items()}
        self._unseen = _UNSEEN_WEIGHT * math.log(1 + count) if count else 0.0

    def align(self, text: str) -> list[tuple[int, float]]:
        """Evidence numbers that ``text`` restates and their scores, best first."""
        answer = _Answer(_content_terms(text, self.language), numbers(text), _names(text))
        total = math.fsum(self._weight.get(t, self._unseen) for t in answer.terms)
        if total == 0:
            return []
        found = {}
        for index in range(len(self._sentences)):
            score = self._score(answer, total, index)
            if score >= ALIGN_THRESHOLD:
                found[index] = score
        pair, pair_score = self._best_pair(answer, total)
        if pair_score > max(found.values(), default=0.0):
            found.update(dict.fromkeys(pair, pair_score))
        scored = [(self.evidence.sentences[i].number, round(s, 4)) for i, s in found.items()]
        return sorted(scored, key=lambda pair: (-pair[1], pair[0]))

    def _score(self, answer: _Answer, total: float, *indexes: int) -> float:
        """The share of the answer's weight the sentences hold together; 0 if they disagree."""
        held = [self._sentences[i] for i in indexes]
        shared = answer.terms & set().union(*(s.terms for s in held))
        if len(shared) < min(MIN_SHARED_TERMS, len(answer.terms)):
            return 0.0
        if not answer.numbers <= set().union(*(s.numbers for s in held)):
            return 0.0
        places = "\n".join(s.names_text for s in held)
        if not all(name in places for name in answer.names):
            return 0.0
        return min(1.0, math.fsum(self._weight[t] for t in shared) / total)

    def _best_pair(self, answer: _Answer, total: float) -> tuple[tuple[int, ...], float]:
        """Two evidence sentences that the answer sentence restates together, if any.

        A model often joins two sentences into one ("The coat is thick and its eyes are green.").
        Each must add a fair part of it that the other lacks, so that the pair is not one match
        and a passenger.
        """
        alone = {
            i: math.fsum(self._weight[t] for t in answer.terms & sentence.terms) / total
            for i, sentence in enumerate(self._sentences)
        }
        parts = [i for i, share in alone.items() if share >= _PAIR_PART]
        best: tuple[tuple[int, ...], float] = ((), 0.0)
        for a, b in itertools.combinations(parts, 2):
            score = self._score(answer, total, a, b)
            adds = min(score - alone[a], score - alone[b])
            if score >= ALIGN_THRESHOLD and adds >= _PAIR_PART and score > best[1]:
                best = ((a, b), score)
        return best


_last: Aligner | None = None


def align(text: str, evidence: Evidence, *, language: str | None) -> list[tuple[int, float]]:
    """The evidence sentences ``text`` restates, as (number, score in [0, 1]), best first.

    Only scores of at least ``ALIGN_THRESHOLD``; ``[]`` when it restates none. The analysis of
    the evidence is kept for the next call with the same evidence (an answer's sentences are
    aligned one after another).
    """
    global _last
    aligner = _last
    if aligner is None or aligner.evidence is not evidence or aligner.language != language:
        aligner = _last = Aligner(evidence, language=language)
    return aligner.align(text)


def _content_terms(text: str, language: str | None) -> frozenset[str]:
    return frozenset(terms(text, language)) - _function_terms(language)


@functools.cache
def _function_terms(language: str | None) -> frozenset[str]:
    return frozenset(terms(_FUNCTION_WORDS.get(language or "", ""), language))


def _passage_text(evidence: Evidence, sentence: EvidenceSentence) -> str:
    passage = evidence.passages[sentence.passage_index]
    return "\n".join(
        [
            passage.chunk.text,
            *passage.chunk.heading_path,
            passage.source.title or "",
            passage.source.filename,
        ]
    )


def _names(text: str) -> frozenset[str]:
    """Capitalised words that do not open a sentence, casefolded, without a possessive 's."""
    names = set()
    for match in _WORD.finditer(text):
        word = match.group()
        if not word[0].isupper() or word == "I":
            continue
        before = text[: match.start()]
        if not before.strip() or _SENTENCE_END.search(before):
            continue
        names.add(re.sub(r"['’]s$", "", word).casefold())
    return frozenset(names)
