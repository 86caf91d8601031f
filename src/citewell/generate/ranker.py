"""A small learned ranker of evidence sentences: which one holds the answer, and how likely.

A conditional logit (a softmax over the candidate sentences, trained to put the mass on the
sentence holding the gold answer) over cheap per-sentence signals (``SIGNALS``): the hand-made
ones of ``extractive.Features``, how they compare with the best of the other sentences, how
close together the question's words sit, shared word pairs and character n-grams, the sentence's
place in its passage, the retrieval's own scores of the sentence and its passage, its length,
whether it holds the kind of answer asked for and the noun the question asks about ("how many
*years*").
The coefficients and the decision thresholds live in ``ranker.json`` next to this module,
written by ``bench/train_ranker.py`` from the tuning articles only (docs/benchmarks.md,
"Extractive answers"); they are read once.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from citewell.analysis import terms
from citewell.generate.answer_types import type_complement
from citewell.generate.base import Evidence
from citewell.language import is_cjk

if TYPE_CHECKING:
    from citewell.generate.extractive import Features

__all__ = ["SIGNALS", "Ranker", "signals"]

WEIGHTS_FILE = Path(__file__).with_name("ranker.json")

SIGNALS = (
    "overlap",
    "context",
    "typed",
    "untyped",
    "fused",
    "rank",
    "overlap_gap",
    "score_gap",
    "top_overlap",
    "proximity",
    "bigrams",
    "char_ngrams",
    "position",
    "first",
    "sentence_score",
    "sentence_listed",
    "dense",
    "dense_gap",
    "lexical",
    "length",
    "novelty",
    "complement",
    "asked_terms",
)
"""The signals of a sentence, in the order of the ranker's coefficients."""


def signals(
    evidence: Evidence, features: Sequence[Features], scores: Sequence[float]
) -> np.ndarray:
    """One row of ``SIGNALS`` per evidence sentence; ``scores`` are the hand-weighted scores."""
    question = evidence.question
    complement = type_complement(question)
    asked_by_language: dict[str | None, _Asked] = {}
    candidates = [i for i, f in enumerate(features) if not f.heading] or list(range(len(features)))
    best_overlap = max((features[i].overlap for i in candidates), default=0.0)
    best_score = max((scores[i] for i in candidates), default=0.0)
    denses = [p.scores.dense or 0.0 for p in evidence.passages]
    best_dense = max(denses, default=0.0)
    best_lexical = max((p.scores.lexical or 0.0 for p in evidence.passages), default=0.0) or 1.0
    listed = [{s.span: s.score for s in p.sentences} for p in evidence.passages]
    in_passage: dict[int, list[int]] = {}
    for i, sentence in enumerate(evidence.sentences):
        in_passage.setdefault(sentence.passage_index, []).append(i)
    rows = np.zeros((len(features), len(SIGNALS)))
    for i, (sentence, f) in enumerate(zip(evidence.sentences, features, strict=True)):
        passage = evidence.passages[sentence.passage_index]
        language = passage.chunk.language
        if language not in asked_by_language:
            asked_by_language[language] = _Asked.of(question, language)
        asked = asked_by_language[language]
        text = sentence.text
        words = terms(text, language, segment_han=False)
        siblings = in_passage[sentence.passage_index]
        place = siblings.index(i)
        score = listed[sentence.passage_index].get(sentence.span)
        new = [w for w in words if w not in asked.terms and not _within_asked(w, asked)]
        rows[i] = (
            f.overlap,
            f.context,
            float(f.answer_type > 0),
            float(f.answer_type < 0),
            f.retrieval,
            f.rank,
            f.overlap - best_overlap,
            scores[i] - best_score,
            float(f.overlap >= best_overlap and best_overlap > 0),
            _proximity(f.matched, words, text, language),
            _share(asked.bigrams, _bigrams(words, text, language)),
            _share(asked.grams, _char_grams(text, language)),
            place / max(1, len(siblings) - 1),
            float(place == 0),
            score or 0.0,
            float(score is not None),
            denses[sentence.passage_index],
            denses[sentence.passage_index] - best_dense,
            (passage.scores.lexical or 0.0) / best_lexical,
            math.log1p(len(text)) / 6,
            len(new) / max(1, len(words)),
            float(complement is not None and complement in text.casefold()),
            math.log1p(len(asked.terms)) / 3,
        )
    return rows


@dataclass(frozen=True, slots=True)
class _Asked:
    terms: frozenset[str]
    bigrams: frozenset[str]
    grams: frozenset[str]
    han: str

    @classmethod
    def of(cls, question: str, language: str | None) -> _Asked:
        words = terms(question, language, segment_han=False)
        return cls(
            frozenset(words),
            frozenset(_bigrams(words, question, language)),
            frozenset(_char_grams(question, language)),
            "".join(ch for ch in question if is_cjk(ch)),
        )


def _within_asked(word: str, asked: _Asked) -> bool:
    """A Chinese run of the sentence that the question holds whole."""
    return bool(asked.han) and is_cjk(word[0]) and word in asked.han


def _share(asked: frozenset[str], found: set[str]) -> float:
    return len(asked & found) / len(asked) if asked else 0.0


def _bigrams(words: Sequence[str], text: str, language: str | None) -> set[str]:
    """Adjacent word pairs; for Chinese, adjacent characters (words are not separated)."""
    if language == "zh" or any(is_cjk(ch) for ch in text[:50]):
        han = [ch for ch in text if is_cjk(ch)]
        return {a + b for a, b in zip(han, han[1:], strict=False)}
    return {f"{a} {b}" for a, b in zip(words, words[1:], strict=False)}


_LETTERS = re.compile(r"\w+")


def _char_grams(text: str, language: str | None) -> set[str]:
    """Character trigrams of the words (Chinese: of the Han runs), case-folded."""
    grams: set[str] = set()
    for word in _LETTERS.findall(text.casefold()):
        size = 2 if is_cjk(word[0]) else 4
        grams.update(word[k : k + size] for k in range(len(word) - size + 1))
    return grams


def _proximity(
    matched: frozenset[str], words: Sequence[str], text: str, language: str | None
) -> float:
    """How tightly the matched question terms sit: their count over the smallest window
    holding them all (in words; for Chinese terms, in characters)."""
    if len(matched) < 2:
        return float(bool(matched))
    han = [t for t in matched if is_cjk(t[0])]
    if han:
        positions = [(text.find(t), t) for t in matched]
        spots = [(p, p + len(t), t) for p, t in positions if p >= 0]
        if len(spots) < 2:
            return 0.5
        start = min(s for s, _, _ in spots)
        end = max(e for _, e, _ in spots)
        return min(1.0, sum(len(t) for _, _, t in spots) / max(1, end - start))
    hits = [(k, w) for k, w in enumerate(words) if w in matched]
    need = len({w for _, w in hits})
    best = len(words) or 1
    counts: dict[str, int] = {}
    left = 0
    for right in range(len(hits)):
        counts[hits[right][1]] = counts.get(hits[right][1], 0) + 1
        while len(counts) == need:
            best = min(best, hits[right][0] - hits[left][0] + 1)
            w = hits[left][1]
            counts[w] -= 1
            if not counts[w]:
                del counts[w]
            left += 1
    return need / best


@dataclass(frozen=True)
class Ranker:
    """The learned coefficients, and when the best sentence is too unlikely to answer with."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    decline_below: float
    """Decline when the best sentence's probability of holding the answer is below this."""
    decline_margin: float
    """Decline, too, when the runner-up's probability is within this of the best's."""

    def probabilities(self, rows: np.ndarray) -> np.ndarray:
        """For each row (a candidate sentence), the probability that it is the one holding the
        answer, if one does: a softmax over the rows."""
        if not len(rows):
            return np.zeros(0)
        z = ((rows - self.mean) / self.scale) @ self.coef
        e = np.exp(z - z.max())
        return np.asarray(e / e.sum())

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Ranker:
        names = data["signals"]
        if list(names) != list(SIGNALS):  # type: ignore[call-overload]
            raise ValueError(f"{WEIGHTS_FILE.name} was trained on other signals: {names}")
        return cls(
            mean=np.asarray(data["mean"], dtype=float),
            scale=np.asarray(data["scale"], dtype=float),
            coef=np.asarray(data["coef"], dtype=float),
            decline_below=float(data["decline_below"]),  # type: ignore[arg-type]
            decline_margin=float(data["decline_margin"]),  # type: ignore[arg-type]
        )

    @staticmethod
    @cache
    def packaged() -> Ranker:
        """The ranker shipped with citewell (read once)."""
        return Ranker.from_dict(json.loads(WEIGHTS_FILE.read_text(encoding="utf-8")))
