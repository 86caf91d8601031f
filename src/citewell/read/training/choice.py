"""Fitting the sentence choice: which sentence answers a part the reader found answered.

Two judges pick a sentence: word overlap (the extractive generator's own choice) and the reader
(its likeliest). On held-out articles neither is always the better one, and which one is depends
on the language and on the reader, so the rule between them (``model.SentenceChoice``: the
reader's likeliest instead, as well, or only where word overlap declines) is fitted per
language on the calibration part, with the reader's blend and threshold, and kept in its card.

What a rule is worth on a calibration question the reader lets through its threshold:
- a question the paragraph answers: the share of the answer's sentences that answer it (its
  citation precision: one sentence is right or wrong; two of which one answers, a half);
  nothing for no answer;
- a question it does not answer: one for no answer, nothing for any.

Precision, not whether the answer holds an answering sentence somewhere: that would reward
saying both sentences whenever the judges differ, a hedge that costs the person reading a
citation. Saying both can still win where several sentences answer (CUAD clauses, MTRAG and
ClapNQ passages), as it does for the shipped reader (docs/benchmarks.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from citewell.model import SentenceChoice, WordAnswer
from citewell.read.training.data import Group

__all__ = ["Pick", "WordPick", "fit_choices", "picks", "word_picks"]

THRESHOLDS = (*(round(0.05 * i, 2) for i in range(1, 20)), 1.01)
"""The grid each of a choice's three thresholds is fitted on (1.01: never)."""


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
    """The candidates that answer; empty for a question the paragraph does not answer."""

    def worth(self, choice: SentenceChoice) -> float:
        chosen = choice.answer(self.word, self.read)
        if not self.gold:
            return 0.0 if chosen else 1.0
        if not chosen:
            return 0.0
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


def picks(
    groups: Sequence[Group],
    scores: Sequence[np.ndarray],
    answered: Sequence[bool],
    words: Sequence[WordAnswer],
) -> list[Pick]:
    """Both judges' picks for each ``answers`` group the reader answers (``answered``), word
    overlap's answer to each being ``words`` (``word_picks``)."""
    found = []
    for group, score, through, word in zip(groups, scores, answered, words, strict=True):
        if group.task != "answers" or not through or not group.candidates:
            continue
        best = int(np.argmax(score))
        found.append(
            Pick(
                language=group.language,
                word=word,
                read=(best, float(score[best])),
                gold=frozenset(i for i, label in enumerate(group.labels) if label),
            )
        )
    return found


def fit_choices(found: Sequence[Pick]) -> tuple[dict[str, SentenceChoice], dict[str, object]]:
    """The best choice for each language of ``found``, and ``"*"`` for all of them together
    (ties go to the higher thresholds: word overlap's pick first, as without a fit); and, per
    language, the worth of the fitted choice beside word overlap's pick alone and the reader's
    likeliest alone."""
    languages = sorted({p.language for p in found})
    choices: dict[str, SentenceChoice] = {}
    figures: dict[str, object] = {}
    grid = [
        SentenceChoice(reader_first=first, both=both, read_alone=alone)
        for first, both, alone in itertools.product(THRESHOLDS, repeat=3)
        if both <= first and alone <= first  # above reader_first, neither applies
    ]
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
        choices[language] = best
        figures[language] = {
            "questions": len(asked),
            "word overlap's pick": round(worth(SentenceChoice(read_alone=1.01)), 4),
            "unfitted (the reader's above 0.5 where word overlap declines)": round(
                worth(SentenceChoice()), 4
            ),
            "the reader's likeliest": round(worth(SentenceChoice(reader_first=0.0)), 4),
            "fitted": round(worth(best), 4),
        }
    return choices, figures
