"""How much of a question's vocabulary each evidence sentence holds.

Terms are analysed as the passage's language indexes them (stems meet: "founded" finds
"founding"), without the question's own function words ("when", "how many", 什么), the words of its
answer-type phrase ("long" in "how long", 多长时间) and its light verbs ("take"): those say what
kind of answer is wanted, which ``answer_types`` judges, and rarely occur in the answer.
Each term weighs by its rarity among the evidence sentences, so the one distinctive word of a
question outweighs the topic words that every retrieved sentence shares.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from citewell.analysis import terms
from citewell.generate.answer_types import without_type_phrase
from citewell.language import is_cjk
from citewell.model import Evidence

__all__ = ["Overlap", "QuestionTerms", "sentence_overlaps"]

_QUESTION_WORDS = {
    "en": "what which who whom whose when where why how did does do many much"
    " he she him his her hers they them their it its i me my we us our you your"
    " is are was were be been being has have had can could would should will shall",
    "es": "qué cuál cuáles quién quiénes cuándo dónde cuánto cuántos cuánta cuántas cómo",
    "zh": "什么 什么样 哪 哪个 哪些 哪里 哪儿 哪一年 谁 多少 几 几个"
    " 为什么 怎么 怎样 如何 何时 时候 是 有",
}
"""Words that shape a question rather than name its subject."""

_LIGHT_VERBS = {
    "en": "take takes took taken get gets got gotten make makes made go goes went gone"
    " come comes came become becomes became happen happens happened occur occurs occurred",
    "es": "tarda tardan tardó tardaron tardar hace hacen hizo hicieron hacer tiene tienen tenía"
    " tenían tuvo tuvieron tener lleva llevan llevó llevar ocurre ocurrió sucede sucedió pasó",
    "zh": "需要 要 用 花 进行 发生 成为",
}
"""Verbs that carry little meaning of their own ("how long do refunds *take*"): the answer
rarely repeats them ("refunds are paid within thirty days")."""


def _stop_terms(language: str | None) -> frozenset[str]:
    words = f"{_QUESTION_WORDS.get(language or '', '')} {_LIGHT_VERBS.get(language or '', '')}"
    return frozenset(t for word in words.split() for t in terms(word, language)) | frozenset(
        words.split()
    )


_STOP_TERMS = {language: _stop_terms(language) for language in _QUESTION_WORDS}


@dataclass
class QuestionTerms:
    """A question's content terms, analysed once per language it is compared in."""

    question: str
    _by_language: dict[str | None, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, question: str) -> QuestionTerms:
        return cls(question)

    def in_language(self, language: str | None) -> frozenset[str]:
        if language not in self._by_language:
            stop = _STOP_TERMS.get(language or "", frozenset())
            asked = without_type_phrase(self.question)
            self._by_language[language] = frozenset(terms(asked, language)) - stop
        return self._by_language[language]


@dataclass(frozen=True, slots=True)
class Overlap:
    share: float
    """Weighted share of the question's terms the sentence holds, in [0, 1]."""
    context_gain: float
    """How much the share grows with the neighbouring sentences of its passage added."""
    matched: frozenset[str]


def sentence_overlaps(question: QuestionTerms, evidence: Evidence) -> list[Overlap]:
    """One ``Overlap`` per evidence sentence, in evidence order."""
    languages = [evidence.passages[s.passage_index].chunk.language for s in evidence.sentences]
    bags = [
        _matched(question.in_language(language), s.text, language)
        for s, language in zip(evidence.sentences, languages, strict=True)
    ]
    weight = _idf(bags)
    overlaps = []
    for i, bag in enumerate(bags):
        asked = question.in_language(languages[i])
        total = sum(weight(t) for t in asked)
        if not total:
            overlaps.append(Overlap(0.0, 0.0, frozenset()))
            continue
        share = sum(weight(t) for t in bag) / total
        around = bag | _neighbours(evidence, bags, i)
        overlaps.append(Overlap(share, sum(weight(t) for t in around) / total - share, bag))
    return overlaps


def _idf(bags: Sequence[frozenset[str]]) -> _Weight:
    frequency = Counter(t for bag in bags for t in bag)
    return _Weight(len(bags), frequency)


@dataclass(frozen=True, slots=True)
class _Weight:
    sentences: int
    frequency: Counter[str]

    def __call__(self, term: str) -> float:
        return math.log(1 + (1 + self.sentences) / (1 + self.frequency[term]))


def _neighbours(evidence: Evidence, bags: Sequence[frozenset[str]], i: int) -> frozenset[str]:
    """Terms of the sentences right before and after, in the same passage."""
    passage = evidence.sentences[i].passage_index
    found: frozenset[str] = frozenset()
    for j in (i - 1, i + 1):
        if 0 <= j < len(bags) and evidence.sentences[j].passage_index == passage:
            found |= bags[j]
    return found


def _matched(asked: frozenset[str], sentence: str, language: str | None) -> frozenset[str]:
    """The question terms the sentence holds (Chinese words by substring, sparing jieba)."""
    if not asked:
        return frozenset()
    han = {t for t in asked if is_cjk(t[0]) and t in sentence}
    return frozenset(han | (asked & set(terms(sentence, language, segment_han=False))))
