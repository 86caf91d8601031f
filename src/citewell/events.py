"""What is asked of the engine, and the events it streams back while it answers.

``Engine.stream`` yields, in order: ``Retrieved`` once, then ``TextDelta`` and ``ClaimDone``
events as the answer grows (a claim's citations right after its last character), then
``Completed`` with the final ``Answer``, whose text is exactly the concatenated deltas. Every
renderer consumes these and nothing else of the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from citewell.model import (
    Answer,
    Citation,
    CitedSource,
    Claim,
    Filter,
    Page,
    PartConflict,
    Passage,
    Span,
    Turn,
)

__all__ = [
    "CitedSentence",
    "Declined",
    "Draft",
    "Remark",
    "TextPiece",
    "AnswerEvent",
    "Citable",
    "ClaimDone",
    "ClaimResult",
    "Completed",
    "Given",
    "LocationKind",
    "Question",
    "Retrieved",
    "TextDelta",
]


@dataclass(frozen=True, slots=True)
class Question:
    """What is asked, and of which sources (beyond the agent's own scope)."""

    text: str
    history: tuple[Turn, ...] = ()
    instructions: str | None = None
    bucket_ids: tuple[str, ...] | None = None
    """Buckets to answer from (e.g. a request's file_search tool); None: the agent's."""
    filters: Filter | None = None
    """Further conditions, joined to the agent's with 'and'."""
    max_passages: int | None = None
    retrieve: bool = True
    """False: answer without looking anything up (grounding 'none')."""
    given: Given | None = None
    """Evidence that comes with the question (a request's own documents): nothing is retrieved,
    and these passages are the evidence, in this order."""


@dataclass(frozen=True, slots=True)
class Given:
    """Passages a caller supplies instead of retrieval, and the pages of those with pages.

    Their sources need not be stored: citations point into the sources' texts as given
    (``Chunk.text`` at ``Chunk.span``), with pages from ``pages``.
    """

    passages: tuple[Passage, ...]
    pages: Mapping[str, tuple[Page, ...]] = field(default_factory=dict)
    """Pages by source id, for the sources that have pages."""


LocationKind = Literal[
    "char_location", "page_location", "content_block_location", "search_result_location"
]


@dataclass(frozen=True, slots=True)
class Citable:
    """How citations into one evidence chunk are named on the wire."""

    kind: LocationKind
    index: int
    """``document_index``, or ``search_result_index``."""
    title: str | None = None
    cite: bool = True
    """False: shown to the generator, but its citations are not shown."""
    file_id: str | None = None
    source: str | None = None
    """A search result's ``source``."""
    units: tuple[Span, ...] = ()
    """The blocks (or sentences) that block indices count, in source coordinates."""
    pages: tuple[Page, ...] = ()


@dataclass(frozen=True, slots=True)
class Retrieved:
    passages: tuple[Passage, ...]
    query: str
    conflicts: tuple[PartConflict, ...] = ()
    """Where the sources read disagree on a part of the question (``Answer.conflict_sides``)."""


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ClaimResult:
    claim: Claim
    citations: tuple[Citation, ...]
    new_sources: tuple[CitedSource, ...]
    """Sources numbered for the first time by this claim."""


@dataclass(frozen=True, slots=True)
class ClaimDone:
    index: int
    result: ClaimResult


@dataclass(frozen=True, slots=True)
class Completed:
    answer: Answer


AnswerEvent = Retrieved | TextDelta | ClaimDone | Completed


# What a generator drafts, for the engine to write into an answer (generate/base.py). -------


@dataclass(frozen=True, slots=True)
class TextPiece:
    """Answer text as written, possibly holding inline ``[n]`` markers."""

    text: str


@dataclass(frozen=True, slots=True)
class CitedSentence:
    """A whole answer sentence and the evidence sentences it rests on (may be empty)."""

    text: str
    evidence: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Remark:
    """Words of the answer's own that state nothing from the sources ("The sources disagree.",
    "According to handbook.md:"): shown as written, never cited nor verified."""

    text: str


@dataclass(frozen=True, slots=True)
class Declined:
    """The evidence does not answer the question."""


Draft = TextPiece | CitedSentence | Remark | Declined
