"""The Reader protocol: does a sentence answer a question, does a span support a claim.

Where the embedder says which passages are near a question, a reader says which of their
sentences answer it, and whether a cited span supports what an answer claims. Scores are in
[0, 1] and calibrated on the development split: 0.5 is where "answers" becomes the likelier
reading. ``answerability`` asks whether the candidates together answer the question at all; its
``decline_rule`` says below which answerability the sources do not answer it, as
``support_threshold`` says below which support a citation is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from citewell.model import DeclineRule, SentenceChoice

__all__ = ["Reader", "Scores", "Task"]

Scores = npt.NDArray[np.float32]
"""One score in [0, 1] per candidate, in the candidates' order."""

Task = Literal["answers", "supports"]
"""What a reader is asked of a pair: does the sentence answer, does the span support."""


class Reader(Protocol):
    name: str
    trained: bool
    """False for the lexical fallback: its scores are word overlap, not reading."""

    def score_answers(
        self, question: str, sentences: Sequence[str], contexts: Sequence[str] = ()
    ) -> Scores:
        """How likely each sentence answers (a part of) the question; ``contexts``, one per
        sentence where given, is what each is part of (its document's or section's title)."""
        ...

    def answerability(
        self, question: str, sentences: Sequence[str], contexts: Sequence[str] = ()
    ) -> float:
        """How likely any of the sentences answers the question (0 for none)."""
        ...

    def score_support(self, claim: str, spans: Sequence[str]) -> Scores:
        """How likely each span, alone, supports the claim."""
        ...

    def decline_rule(self, language: str | None) -> DeclineRule:
        """Below which ``answerability`` a question (a part of one) in this language (None:
        unknown) goes unanswered."""
        ...

    def sentence_choice(self, language: str | None) -> SentenceChoice:
        """How a part's answer sentence is chosen in this language (None: unknown), between
        word overlap's pick and this reader's likeliest."""
        ...

    def support_threshold(self, language: str | None) -> float:
        """The least ``score_support`` at which a citation of a claim in this language (None:
        unknown) is kept, where its agent sets none."""
        ...
