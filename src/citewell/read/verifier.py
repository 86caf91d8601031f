"""The reader as the engine's verifier: does the cited text support the claim that cites it.

The reader's support head scores (claim, cited text) as one pair, the cited ranges of a
citation joined; a claim quoted verbatim is supported outright, as by the lexical verifier, so
an extractive answer (its own evidence, copied) costs no reading.
"""

from __future__ import annotations

from collections.abc import Sequence

from citewell.cite.verify import settled_support
from citewell.read.base import Reader

__all__ = ["ReaderVerifier"]


class ReaderVerifier:
    """A ``citewell.cite.verify.Verifier`` that asks the reader."""

    name = "reader"

    def __init__(self, reader: Reader) -> None:
        self.reader = reader

    def support(self, claim: str, cited: Sequence[str], *, language: str | None) -> float:
        settled = settled_support(claim, cited)
        if settled is not None:
            return settled
        return float(self.reader.score_support(claim, [" ".join(cited)])[0])
