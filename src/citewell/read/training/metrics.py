"""How well scores read: answer-sentence top-1, answerability and support ROC-AUC."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["roc_auc", "top1"]


def top1(labels: Sequence[Sequence[int]], scores: Sequence[Sequence[float]]) -> float:
    """Share of groups with an answering candidate whose best-scored candidate answers."""
    hits = [
        group[int(np.argmax(scored))]
        for group, scored in zip(labels, scores, strict=True)
        if any(group)
    ]
    return float(np.mean(hits)) if hits else float("nan")


def roc_auc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """Probability that a positive outscores a negative (ties count half)."""
    if not positive or not negative:
        return float("nan")
    ranked = np.concatenate([np.asarray(positive, float), np.asarray(negative, float)])
    _, inverse, counts = np.unique(ranked, return_inverse=True, return_counts=True)
    below = np.cumsum(counts) - counts
    ranks = (below + (counts + 1) / 2)[inverse]  # ties share their mean rank
    count = len(positive)
    return float((ranks[:count].sum() - count * (count + 1) / 2) / (count * len(negative)))
