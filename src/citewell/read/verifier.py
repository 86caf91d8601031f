"""The reader as the engine's verifier: does the cited text support the claim that cites it.

The reader's support head scores (claim, cited text) as one pair, the cited ranges of a
citation joined; a claim quoted verbatim is supported outright, as by the lexical verifier, so
an extractive answer (its own evidence, copied) costs no reading.
"""

from __future__ import annotations

from collections.abc import Sequence

from citewell.read.base import Reader

__all__ = ["ReaderVerifier"]


class ReaderVerifier:
    """A ``citewell.cite.verify.Verifier`` that asks the reader."""

    name = "reader"

    def __init__(self, reader: Reader) -> None:
        self.reader = reader

    def support(self, claim: str, cited: Sequence[str], *, language: str | None) -> float:
        evidence = " ".join(cited)
        if not evidence.strip() or not claim.strip():
            return 0.0
        if " ".join(claim.split()) in " ".join(evidence.split()):
            return 1.0
        return float(self.reader.score_support(claim, [evidence])[0])
