"""Fitting the decline rule: below which answerability a part goes unanswered, per language and
by whether word overlap would answer it too (``model.DeclineRule``).

The rule is chosen on the calibration part by one stated aim: decline as many of its
unanswerable questions as possible while declining at most ``FALSE_REFUSAL`` of its answerable
ones, in each language. A refusal of a question the documents answer is the failure a person
notices first, so that share is the constraint, and the other is what is won.

Each data set's answerable questions weigh the same in that share, however many it brings: a
person's documents are not one data set's kind, and a pooled share is spent where a set is
hardest and smallest. Pooled, Chinese's read as served were DRCD's four times over XQuAD zh's,
and the rule fitted there declined 0.209 of XQuAD zh's calibration questions and 0.185 of its
held-out ones; weighed by set, 0.116 and 0.100 (docs/benchmarks.md, seventeenth session).

Why two thresholds: on the calibration part, a question whose words no sentence holds (word
overlap declines it) is unanswerable about twice as often as one that word overlap would answer;
with one threshold for both, a language's budget of false refusals is spent on questions the
two judges agree on. How much the second threshold wins is in the calibration figures
(``figures``: the single threshold's refusal beside the rule's) and docs/benchmarks.md.

Never the other way round: word overlap's agreement never asks more of the reader. Read as the
engine serves them, SQuAD 2.0's unanswerable questions are mostly ones word overlap would answer,
since they were written to share their paragraph's words, and a free fit asks more of a part
word overlap answers (English, the shipped reader: 0.44 against 0.21) — the data set's quirk
that ``calibrate.fit_blend`` keeps out of the blends, which would decline a person asking in
the handbook's own words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from citewell.model import DeclineRule

__all__ = ["FALSE_REFUSAL", "MIN_ANSWERABLE", "Asked", "decline_threshold", "fit_decline_rules"]

FALSE_REFUSAL = 0.08
"""The share of answerable questions the rule may decline. Below the 0.10 that answers are held
to on held-out data (docs/benchmarks.md), since the calibration part is a sample of its own."""
_ROUNDING = 1e-9
"""Weights sum to the budget with a float's error; a question just at it is within it."""
MIN_ANSWERABLE = 20
"""The fewest answerable questions on each side (worded, unworded) for a language to get two
thresholds; with fewer, a threshold would be fitted to a handful of questions, and the language
gets one threshold for both."""


@dataclass(frozen=True)
class Asked:
    """One calibration question as a decline rule sees it."""

    language: str
    answerable: bool
    """Whether its sources answer it (the data set says)."""
    answerability: float
    """The reader's probability that the sentences it read answer it."""
    worded: bool
    """Whether word overlap would answer it too (the rule's lower threshold applies)."""
    source: str = ""
    """The data set it comes from: each set's answerable questions weigh the same."""


def decline_threshold(
    best: ArrayLike,
    answerable: ArrayLike,
    false_refusal: float = FALSE_REFUSAL,
    weights: ArrayLike | None = None,
) -> float:
    """The highest answerability threshold that declines at most ``false_refusal`` of the
    answerable questions (by ``weights``, each 1 unless given), midway between two observed
    scores; 0.5 when the questions hold no unanswerable one (or no answerable one)."""
    scores = np.asarray(best, dtype=np.float64)
    kept = np.asarray(answerable, dtype=bool)
    if kept.all() or not kept.any():
        return 0.5
    each = np.ones(len(scores)) if weights is None else np.asarray(weights, dtype=np.float64)
    return _highest_declining(scores, kept, each, false_refusal * kept.sum())


def fit_decline_rules(
    asked: Sequence[Asked], false_refusal: float = FALSE_REFUSAL
) -> tuple[dict[str, DeclineRule], dict[str, dict[str, float]]]:
    """The rule for each language, and ``"*"`` for all of them together; and per language, its
    thresholds' refusal of unanswerable and false refusal of answerable questions beside those
    of a single threshold."""
    scores = np.asarray([a.answerability for a in asked], dtype=np.float64)
    kept = np.asarray([a.answerable for a in asked], dtype=bool)
    agree = np.asarray([a.worded for a in asked], dtype=bool)
    spoken = np.asarray([a.language for a in asked])
    sources = np.asarray([a.source for a in asked])
    rules: dict[str, DeclineRule] = {}
    figures: dict[str, dict[str, float]] = {}
    for language in [*sorted(set(spoken.tolist())), "*"]:
        mask = np.ones(len(scores), dtype=bool) if language == "*" else spoken == language
        if not mask.any():
            continue
        weights = _weights(sources[mask], kept[mask])
        rule = _fit(scores[mask], kept[mask], agree[mask], weights, false_refusal)
        single = DeclineRule.single(
            decline_threshold(scores[mask], kept[mask], false_refusal, weights)
        )
        rules[language] = rule
        at = (scores[mask], kept[mask], agree[mask], weights)
        figures[language] = {
            "questions": int(mask.sum()),
            "worded": round(rule.worded, 4),
            "unworded": round(rule.unworded, 4),
            **_rates("", rule, *at),
            "single threshold": round(single.worded, 4),
            **_rates("single ", single, *at),
        }
    return rules, figures


def _weights(sources: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """Each question's weight in the share of answerable ones declined: an answerable one's the
    same total for each set, summing to their number; an unanswerable one's 1."""
    weights = np.ones(len(sources))
    named = np.unique(sources[kept])
    for source in named:
        mine = kept & (sources == source)
        weights[mine] = kept.sum() / (len(named) * mine.sum())
    return weights


def _fit(
    scores: np.ndarray,
    kept: np.ndarray,
    agree: np.ndarray,
    weights: np.ndarray,
    false_refusal: float,
) -> DeclineRule:
    """The two thresholds, the worded one no higher, that decline the most unanswerable
    questions within the budget of answerable ones (ties: the less weight of answerable ones
    declined, then the closer to one threshold)."""
    single = DeclineRule.single(decline_threshold(scores, kept, false_refusal, weights))
    if kept.all() or not kept.any():
        return single  # 0.5: nothing to tell apart
    if min((kept & agree).sum(), (kept & ~agree).sum()) < MIN_ANSWERABLE:
        return single
    budget = false_refusal * kept.sum()
    best, best_key = single, _key(single, single, scores, kept, agree, weights)
    words, others = scores[agree], scores[~agree]
    answered_words = kept[agree]
    for worded in _thresholds(words):
        spent = float(weights[agree][answered_words & (words < worded)].sum())
        if spent > budget + _ROUNDING:
            break  # higher thresholds only spend more
        unworded = _highest_declining(others, kept[~agree], weights[~agree], budget - spent)
        if unworded < worded:
            break  # and the higher ones leave less of the budget, so less room still
        rule = DeclineRule(worded=worded, unworded=unworded)
        key = _key(rule, single, scores, kept, agree, weights)
        if key > best_key:
            best, best_key = rule, key
    return best


def _thresholds(scores: np.ndarray) -> list[float]:
    """Every threshold that splits these scores differently: midway between neighbours, and
    below the lowest."""
    ordered = np.unique(scores)
    if not len(ordered):
        return [0.0]
    return [float(ordered[0] - 1e-3), *((ordered[:-1] + ordered[1:]) / 2).tolist()]


def _highest_declining(
    scores: np.ndarray, kept: np.ndarray, weights: np.ndarray, allowed: float
) -> float:
    """The highest threshold that declines answerable scores of at most ``allowed`` weight (all
    of them, where that is allowed: above the highest score), midway between observed scores."""
    order = np.argsort(scores[kept], kind="stable")
    answered = scores[kept][order]
    spent = np.cumsum(weights[kept][order])
    declinable = int(np.searchsorted(spent, allowed + _ROUNDING, side="right"))
    if declinable >= len(answered):
        return float(min(1.0, scores.max() + 1e-3))
    upper = answered[declinable]  # the lowest answerable one kept
    below = scores[scores < upper]
    lower = below.max() if len(below) else upper - 1e-3
    return float((upper + lower) / 2)


def _key(
    rule: DeclineRule,
    single: DeclineRule,
    scores: np.ndarray,
    kept: np.ndarray,
    agree: np.ndarray,
    weights: np.ndarray,
) -> tuple[int, float, float]:
    declined = _declined(rule, scores, agree)
    apart = abs(rule.worded - single.worded) + abs(rule.unworded - single.unworded)
    return int((declined & ~kept).sum()), -float(weights[declined & kept].sum()), -apart


def _declined(rule: DeclineRule, scores: np.ndarray, agree: np.ndarray) -> np.ndarray:
    return np.where(agree, scores < rule.worded, scores < rule.unworded)


def _rates(
    prefix: str,
    rule: DeclineRule,
    scores: np.ndarray,
    kept: np.ndarray,
    agree: np.ndarray,
    weights: np.ndarray,
) -> dict[str, float]:
    """The share of unanswerable questions declined, and the weighted share of answerable ones."""
    declined = _declined(rule, scores, agree)
    refusal = float(declined[~kept].mean()) if (~kept).any() else 0.0
    false = float(weights[declined & kept].sum() / kept.sum()) if kept.any() else 0.0
    return {f"{prefix}refusal": round(refusal, 4), f"{prefix}false refusal": round(false, 4)}
