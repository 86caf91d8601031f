"""How the reader's three signals become one calibrated probability.

The network reads the pair; word overlap and e5-small's cosine each see something it misses
(a rare name shared word for word; a paraphrase that e5's pre-training knows). A blend is a
logistic regression over the three, fit per task on the calibration part of the training data,
articles the network never trained on (``citewell.read.training.calibrate``), so its output is
a probability and the decline threshold means the same for every question.

Three blends: ``answers`` and ``supports`` score one candidate from its own signals;
``answerable`` scores a question from the best of each signal over its candidates
(``best_signals``), as word overlap and e5's cosine rank sentences well but cannot tell a question
the sources answer from one that merely shares their words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from citewell.read.base import Scores

__all__ = ["SIGNALS", "Blend", "Judgement", "Signals", "best_signals"]

SIGNALS = ("network", "overlap", "cosine")
"""The signals' columns: the network's logit, word overlap in [0, 1], e5's cosine."""

Signals = npt.NDArray[np.float32]
"""(candidates, len(SIGNALS))."""

Judgement = Literal["answers", "supports", "answerable"]
"""What a blend judges: a sentence answers, a span supports, a question is answered at all."""


def best_signals(signals: Signals) -> Signals:
    """The best of each signal over a question's candidates: the ``answerable`` blend's input,
    (1, len(SIGNALS))."""
    best: Signals = signals.max(axis=0, keepdims=True)
    return best


@dataclass(frozen=True)
class Blend:
    """``sigmoid(signals @ weights + bias)``; the identity blend reads the network alone."""

    weights: tuple[float, ...] = (1.0, 0.0, 0.0)
    bias: float = 0.0

    def __post_init__(self) -> None:
        if len(self.weights) != len(SIGNALS):
            raise ValueError(f"a blend weighs {len(SIGNALS)} signals, not {len(self.weights)}")

    def weighs(self, signal: str) -> bool:
        """Whether the blend's score depends on ``signal`` (one of ``SIGNALS``)."""
        return self.weights[SIGNALS.index(signal)] != 0.0

    def scores(self, signals: Signals) -> Scores:
        logits = signals.astype(np.float64) @ np.asarray(self.weights) + self.bias
        scores: Scores = (1.0 / (1.0 + np.exp(-logits))).astype(np.float32)
        return scores

    @classmethod
    def from_spec(cls, spec: Mapping[str, object]) -> Blend:
        weights = spec["weights"]
        bias = spec["bias"]
        assert isinstance(weights, Sequence) and isinstance(bias, int | float)
        return cls(tuple(float(w) for w in weights), float(bias))

    def spec(self) -> dict[str, object]:
        return {
            "signals": list(SIGNALS),
            "weights": [round(w, 6) for w in self.weights],
            "bias": round(self.bias, 6),
        }
