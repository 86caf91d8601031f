"""Fitting the support threshold: per language, the least support score at which the reader
keeps a citation (``Reader.support_threshold``).

It is chosen on the calibration part by one stated aim: tell supported claims from unsupported
ones as well as the scores allow, each side weighed by its own count — the threshold with the
most of the supported claims' citations kept plus the most of the unsupported ones' dropped
(Youden's J). Neither error is the cheap one here: a correct citation dropped leaves its claim
uncited, and an answer with no citation left is declined (``cite.writer``); a wrong one kept is
a source shown for what it does not say.

Why a threshold of the card's and not one number for every verifier: the support blend is fit
on the calibration part's mix, about one supported claim to four unsupported ones (hard ones: a
number, a name or a negation changed), so its scores are probabilities at that mix, not at even
odds. At the 0.4 the lexical verifier was calibrated at, the reader dropped 43-63 % of the
supported calibration claims' citations in each language (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["fit_support_thresholds"]


def fit_support_thresholds(
    scores: Sequence[float], supported: Sequence[bool], languages: Sequence[str]
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """The threshold for each language, and ``"*"`` for all of them together, from each
    (claim, span) pair's support score, label and language; and per language, the share of
    supported pairs it keeps and of unsupported ones it drops. A language with pairs of one
    kind only gets none of its own."""
    values = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(supported, dtype=bool)
    spoken = np.asarray(languages)
    thresholds: dict[str, float] = {}
    figures: dict[str, dict[str, float]] = {}
    for language in [*sorted(set(languages)), "*"]:
        mask = np.ones(len(values), dtype=bool) if language == "*" else spoken == language
        if not labels[mask].any() or labels[mask].all():
            continue
        threshold = _best_told_apart(values[mask], labels[mask])
        kept = values[mask] >= threshold
        thresholds[language] = threshold
        figures[language] = {
            "supported": int(labels[mask].sum()),
            "unsupported": int((~labels[mask]).sum()),
            "threshold": threshold,
            "supported kept": round(float(kept[labels[mask]].mean()), 4),
            "unsupported dropped": round(float((~kept)[~labels[mask]].mean()), 4),
        }
    return thresholds, figures


def _best_told_apart(values: np.ndarray, labels: np.ndarray) -> float:
    """The threshold with the highest share of supported pairs kept plus unsupported ones
    dropped (ties: the lowest, which keeps more), midway between two observed scores and
    rounded down to the card's four decimals, which then keep what the fit kept."""
    ordered = np.unique(values)
    candidates = np.concatenate([[ordered[0]], (ordered[:-1] + ordered[1:]) / 2])
    candidates = np.floor(candidates * 1e4) / 1e4
    positives, negatives = values[labels], values[~labels]
    told_apart = [
        float((positives >= t).mean() + (negatives < t).mean()) for t in candidates.tolist()
    ]
    return float(candidates[int(np.argmax(told_apart))])
