"""The Generator protocol: evidence in, a draft answer out, streamed.

The engine packs the retrieved passages as numbered evidence sentences; a generator writes the
answer from them and says which evidence sentences each part rests on, in one of two ways:

- ``TextPiece``: free text as it streams, with inline markers ``[3]`` naming evidence sentences
  (LLMs asked to cite by number). The engine parses and strips the markers.
- ``CitedSentence``: one whole answer sentence with the numbers it rests on (generators that
  know their citations structurally: the extractive one, Anthropic's citations API).

A generator that finds nothing in the evidence to answer with yields ``Declined``. One that
``judges_answerability`` (a model, told to reply that the evidence does not answer) is asked
whatever the reader thought of the evidence; for one that cannot judge (the extractive one), the
reader decides, and a question it finds unanswered never reaches the generator. (The drafts
are defined in ``citewell.events``, which the answer writer reads too.) Generators never see the
store, never compute offsets and never decide what is shown: attribution and verification belong
to the engine.

A generator whose backend writes a bounded number of answers at once (a model in this process)
is also ``Queued``: the engine takes a place for the answer before anything of it is sent, so a
full queue is an ordinary HTTP error (429) rather than a stream that fails after its start.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from citewell.events import Draft
from citewell.model import Agent, Evidence

__all__ = [
    "Generator",
    "Queued",
]


class Generator(Protocol):
    """Writes an answer from evidence. Raises ``GeneratorError`` when its backend fails."""

    name: str
    judges_answerability: bool
    """Whether it decides itself when the evidence does not answer the question."""

    def generate(self, evidence: Evidence, *, agent: Agent) -> AsyncIterator[Draft]: ...


@runtime_checkable
class Queued(Protocol):
    """A generator that holds a bounded number of answers, written or waiting, at once."""

    def place(self) -> AbstractContextManager[None]:
        """A place for one answer, held until exit; ``GeneratorBusy`` at once when none is free.

        Taking a place never waits: waiting for the backend happens in ``generate``."""
        ...
