"""The fallback reader: word overlap, for when the trained reader cannot be built.

``score_answers`` is the share of the question's content words (weighted towards long, specific
words) that a sentence holds, and ``answerability`` the best sentence's; ``score_support`` is the
calibrated lexical verifier's. Neither reads: a sentence that repeats the question's words
without answering it scores high.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from citewell.analysis import terms
from citewell.cite.verify import CalibratedVerifier
from citewell.language import detect_language, is_cjk
from citewell.model import DeclineRule, SentenceChoice
from citewell.read.base import Scores

__all__ = ["LexicalReader"]


class LexicalReader:
    name = "lexical"
    trained = False

    def __init__(self) -> None:
        self._verifier = CalibratedVerifier()

    def score_answers(
        self, question: str, sentences: Sequence[str], contexts: Sequence[str] = ()
    ) -> Scores:
        """Word overlap of each sentence alone (``contexts`` are not read)."""
        language = detect_language(question)
        asked = set(terms(question, language))
        weight = sum(len(t) for t in asked)

        def overlap(sentence: str) -> float:
            if not weight:
                return 0.0
            held = set(terms(sentence, language))
            found = (t for t in asked if t in held or (is_cjk(t[0]) and t in sentence))
            return sum(len(t) for t in found) / weight

        return np.array([overlap(s) for s in sentences], dtype=np.float32)

    def answerability(
        self, question: str, sentences: Sequence[str], contexts: Sequence[str] = ()
    ) -> float:
        return float(self.score_answers(question, sentences).max(initial=0.0))

    def score_support(self, claim: str, spans: Sequence[str]) -> Scores:
        language = detect_language(claim)
        return np.array(
            [self._verifier.support(claim, [span], language=language) for span in spans],
            dtype=np.float32,
        )

    def decline_rule(self, language: str | None) -> DeclineRule:
        """Half the question's words held by a sentence: its answerability is word overlap
        itself, so there is no second judge to agree with."""
        return DeclineRule.single(0.5)

    def sentence_choice(self, language: str | None) -> SentenceChoice:
        """Word overlap's own choice: its scores are word overlap, with nothing to add."""
        return SentenceChoice()

    def support_threshold(self, language: str | None) -> float:
        """The lexical verifier's: its scores are the lexical verifier's."""
        return self._verifier.threshold(language)
