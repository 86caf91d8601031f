"""Whether a cited range supports the claim that cites it.

``Verifier`` scores (claim, cited text) in [0, 1]; the engine keeps a citation only when the
score reaches the agent's ``support_threshold``. ``LexicalVerifier`` is the default that needs no
model: the share of the claim's content words found in the cited text, with every number of the
claim required to appear there too (a claim that changes "30 days" into "60 days" shares all its
words but one, and that one decides).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from citewell.analysis import terms
from citewell.cite.numbers import numbers, without_numbers
from citewell.language import is_cjk

__all__ = ["LexicalVerifier", "Verifier"]


class Verifier(Protocol):
    name: str

    def support(self, claim: str, cited: Sequence[str], *, language: str | None) -> float:
        """How well the cited texts, together, support the claim: 0 (not at all) to 1."""
        ...


class LexicalVerifier:
    name = "lexical"

    def support(self, claim: str, cited: Sequence[str], *, language: str | None) -> float:
        evidence = " ".join(cited)
        if not evidence.strip():
            return 0.0
        if " ".join(claim.split()) in " ".join(evidence.split()):
            return 1.0  # quoted verbatim
        stated = numbers(claim)
        if not stated <= numbers(evidence):
            return 0.0
        # Numbers agree by value ("30" and "thirty"), so they count apart from the words.
        words = set(terms(without_numbers(claim), language))
        if not words and not stated:
            return 0.0
        evidence_terms = set(terms(evidence, language))
        found = {t for t in words if t in evidence_terms or (is_cjk(t[0]) and t in evidence)}
        return (len(found) + len(stated)) / (len(words) + len(stated))
