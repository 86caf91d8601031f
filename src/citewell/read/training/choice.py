"""Fitting the sentence choice: which sentence answers a part the reader found answered.

Two judges pick a sentence: word overlap (the extractive generator's own choice) and the reader
(its likeliest). On held-out articles neither is always the better one, and which one is depends
on the language and on the reader, so the rule between them (``model.SentenceChoice``: the
reader's likeliest instead, or as well) is fitted per language on the calibration part, with the
reader's blend and threshold, and kept in its card: on the calibration articles' questions as
the engine serves them (``citewell.served_reads``), since fitted on each question against its
own paragraph's sentences, it put the reader's likeliest first in English for runs 9, 11 and 12
and lost XQuAD's held-out answers each time (docs/benchmarks.md).

The choice only picks: whether a part is answered at all is the decline rule's to say, fitted at
a stated false refusal (``decline``), and a choice that also declined would refuse answerable
questions past that rule's bound (it did: word overlap declining a part the reader answered,
unless the reader's likeliest scored a third threshold, cost the shipped reader a quarter of
ClapNQ's answerable questions; docs/benchmarks.md). So a rule is fitted on the answerable
calibration questions the reader lets through its threshold, each worth the share of the
answer's sentences that answer it (its citation precision: one sentence is right or wrong; two
of which one answers, a half). The best rule on the grid is kept only where it gains on word
overlap's pick first by more than chance (``SIGNIFICANCE``): word overlap's pick is the judge
the engine answered with before there was a reader, and a gain of a few questions on the
calibration part did not hold on articles neither had seen.

Precision, not whether the answer holds an answering sentence somewhere: that would reward
saying both sentences whenever the judges differ, a hedge that costs the person reading a
citation. Saying both can still win where several sentences answer (CUAD clauses, MTRAG and
ClapNQ passages), as it does for the shipped reader (docs/benchmarks.md).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from citewell.model import SentenceChoice, WordAnswer
from citewell.read.training.data import Group

__all__ = ["Pick", "WordPick", "by_chance", "fit_choices", "word_picks"]

THRESHOLDS = (*(round(0.05 * i, 2) for i in range(20)), 1.01)
"""The grid each of a choice's two thresholds is fitted on (0: always; 1.01: never)."""
SIGNIFICANCE = 0.05
"""How unlikely by chance the best choice's gain on word overlap's pick first must be for the
card to depart from it. The calibration part is a sample: for the shipped reader, the best
choice in each language gained on a few dozen questions where the two judges differ (English:
25 better, 16 worse; by chance 0.11), and the reader's likeliest first then lost XQuAD's
answers on articles neither had seen (docs/benchmarks.md, "Who declines, and nobody else")."""


@dataclass(frozen=True, slots=True)
class Pick:
    """What each judge makes of one calibration question the reader let through."""

    language: str
    word: WordAnswer
    """Word overlap's answer (candidates' indices): one, those that answer together, or none
    where it declines."""
    read: tuple[int, float]
    """The reader's likeliest candidate and its score."""
    gold: frozenset[int]
    """The candidates that answer (at least one)."""

    def worth(self, choice: SentenceChoice) -> float:
        chosen = choice.answer(self.word, self.read)
        return sum(i in self.gold for i in chosen) / len(chosen)


class WordPick(Protocol):
    """Which of a paragraph's sentences, under its title, word overlap answers a question with
    (none: it declines): the extractive generator's ``word_pick``, passed in by whoever
    calibrates (a reader knows nothing of generators)."""

    def __call__(
        self, question: str, sentences: Sequence[str], *, title: str | None
    ) -> WordAnswer: ...


def word_picks(groups: Sequence[Group], word_pick: WordPick) -> list[WordAnswer]:
    """Word overlap's answer to each ``answers`` group (none for a claim), its candidates read
    as one passage under its title, the way the engine reads a source."""
    return [
        word_pick(g.first, g.candidates, title=g.contexts[0] if g.contexts else None)
        if g.task == "answers" and g.candidates
        else WordAnswer()
        for g in groups
    ]


def fit_choices(found: Sequence[Pick]) -> tuple[dict[str, SentenceChoice], dict[str, object]]:
    """The choice for each language of ``found``, and ``"*"`` for all of them together: the
    best on the grid (ties go to the higher thresholds: word overlap's pick first, as without a
    fit), if it gains on word overlap's pick first by more than chance (``SIGNIFICANCE``), else
    word overlap's pick first; and, per language, the worth of the best beside word overlap's
    pick first and the reader's likeliest always, and how likely its gain is by chance."""
    languages = sorted({p.language for p in found})
    choices: dict[str, SentenceChoice] = {}
    figures: dict[str, object] = {}
    grid = [
        SentenceChoice(reader_first=first, both=both)
        for first, both in itertools.product(THRESHOLDS, repeat=2)
        if both <= first  # above reader_first, both never applies
    ]
    word_first = SentenceChoice()
    for language in [*languages, "*"]:
        asked = [p for p in found if language in ("*", p.language)]
        if not asked:
            continue

        def worth(choice: SentenceChoice, asked: Sequence[Pick] = asked) -> float:
            return sum(p.worth(choice) for p in asked) / len(asked)

        best = max(
            reversed(grid),  # the first best is kept: the highest thresholds among equals
            key=worth,
        )
        gains = [p.worth(best) - p.worth(word_first) for p in asked]
        chance = by_chance(sum(g > 0 for g in gains), sum(g < 0 for g in gains))
        choices[language] = best if chance < SIGNIFICANCE else word_first
        figures[language] = {
            "questions": len(asked),
            "word overlap's pick": round(worth(word_first), 4),
            "the reader's likeliest": round(worth(SentenceChoice(reader_first=0.0)), 4),
            "best": round(worth(best), 4),
            "best's gain by chance": round(chance, 4),
            "fitted": round(worth(choices[language]), 4),
        }
    return choices, figures


def by_chance(better: int, worse: int) -> float:
    """How likely a choice that is no better than another would be found better on at least
    ``better`` of the ``better + worse`` questions where the two differ: a one-sided sign test,
    each such question a fair coin."""
    differ = better + worse
    heads = sum(math.comb(differ, k) for k in range(better, differ + 1))
    return heads / (1 << differ)
