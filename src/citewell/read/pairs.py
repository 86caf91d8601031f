"""A (question, sentence) or (claim, span) pair as the reader's token ids.

The pair is one sequence in XLM-R's pair layout, ``<s> first </s></s> second </s>``, with e5's
own prefixes ("query: ", "passage: ") so the first layers read each side as they were trained
to. Each side is cut to a budget of tokens, so one long span cannot crowd out the question; the
same function feeds training and the built model, so both see the same ids.

A sentence may come with its ``context``: the title of what it is part of (an article, a
document, a section), read before it as ``passage: {context}: {sentence}``, so that "It opened in
1902" can be read as a sentence about the museum its title names.
"""

from __future__ import annotations

from dataclasses import dataclass

from citewell.encoder.tokenizer import Tokenizer

__all__ = ["PairLimits", "pair_ids"]


@dataclass(frozen=True)
class PairLimits:
    """Most tokens kept of each side (its prefix included)."""

    first: int = 64
    second: int = 160
    context_chars: int = 0
    """Most characters of a sentence's context read before it: 0 for a model trained without
    context, which reads none."""


def pair_ids(
    tokenizer: Tokenizer,
    first: str,
    second: str,
    limits: PairLimits = PairLimits(),
    context: str = "",
) -> list[int]:
    """The ids of ``first`` (a question or claim) paired with ``second`` (a sentence or span),
    read in its ``context`` (none when empty)."""
    vocabulary = tokenizer.vocabulary
    asked = tokenizer.encode(f"query: {first}")[: limits.first]
    around = " ".join(context.split())[: limits.context_chars].strip()  # "" for none
    read = tokenizer.encode(f"passage: {around}: {second}" if around else f"passage: {second}")
    read = read[: limits.second]
    bos, eos = vocabulary.bos, vocabulary.eos
    return [bos, *asked, eos, eos, *read, eos]
