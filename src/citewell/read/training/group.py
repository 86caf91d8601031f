"""The reader's groups: a question or claim with the sentences it is read against, and the rule
that keeps an article in one part (training, calibration or validation) for every set."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from citewell.evaluate.holdout import held_out, salted_hash
from citewell.ingest.base import Block, BlockKind
from citewell.ingest.segment import sentence_spans
from citewell.model import Span
from citewell.read.base import Task

__all__ = [
    "MAX_CANDIDATES",
    "Group",
    "Part",
    "Task",
    "article_part",
    "calibration_articles",
    "sentences",
    "words",
]

Part = Literal["training", "calibration", "validation"]
CALIBRATION_SALT = "citewell-reader-calibration"
MAX_CANDIDATES = 6
"""Candidates kept per training group: every answering one, then the hardest others."""


@dataclass
class Group:
    """One question or claim with its candidates; ``labels[i]`` is 1 if candidate i answers."""

    task: Task
    dataset: str
    language: str
    first: str
    candidates: list[str]
    labels: list[int]
    answerable: bool = field(default=True)
    contexts: list[str] = field(default_factory=list)
    """Each candidate's context (the title of its article or paragraph); empty: none."""

    def titled(self, title: str) -> Group:
        """The group with every candidate in the context of one ``title``."""
        return dataclasses.replace(self, contexts=[title] * len(self.candidates))


def article_part(key: str, *, validated: bool = True) -> Part:
    """Which part an article (title, or record id) or paragraph is in: validation (the
    held-out half of a development set's articles, ``evaluate.holdout``), calibration (a fifth
    of the rest), else training. ``validated=False`` for keys that never validate
    (training-data sets, paragraphs)."""
    if validated and held_out(key):
        return "validation"
    return "calibration" if salted_hash(CALIBRATION_SALT, key) % 5 == 0 else "training"


def calibration_articles(training_side: Mapping[str, Iterable[str]]) -> frozenset[str]:
    """The articles that calibrate, given each set's training-side article titles: the fifth of
    each set's with the lowest salted hashes, rounded up, so that a set with six articles gives
    two whole ones (a fifth by hash alone gave no English or Spanish Wikipedia article). An
    article that calibrates in one set calibrates in all: XQuAD's translations and SQuAD-es are
    keyed by the English title, so no translation of a calibration article is trained on.

    Whole articles, not paragraphs: a calibration paragraph of an article whose other paragraphs
    the reader trained on flattered it (``bench/engine_choice.py``: English, 0.837 on those
    paragraphs, 0.864 against word overlap's 0.869 on the held-out half)."""
    chosen: set[str] = set()
    for titles in training_side.values():
        ranked = sorted(set(titles), key=lambda title: salted_hash(CALIBRATION_SALT, title))
        chosen.update(ranked[: math.ceil(len(ranked) / 5)])
    return frozenset(chosen)


def sentences(text: str) -> list[Span]:
    """citewell's own sentences of one paragraph (what the engine's candidates are)."""
    return list(
        sentence_spans(text, [Block(BlockKind.PARAGRAPH, Span(start=0, end=len(text)), ())])
    )


_WORD = re.compile(r"\w+")


def words(text: str) -> set[str]:
    """Lowercased words, and single CJK characters (Chinese has no spaces)."""
    found = set()
    for word in _WORD.findall(text.lower()):
        if any("\u4e00" <= ch <= "\u9fff" for ch in word):
            found.update(word)
        elif len(word) > 2:
            found.add(word)
    return found
