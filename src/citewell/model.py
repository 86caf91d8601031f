"""The vocabulary of citewell, defined once and used everywhere.

Units, fixed for the whole project:

- **Offsets are Unicode code points** (Python ``str`` indices) into one text: a source's canonical
  text or an answer's text. ``start`` is inclusive, ``end`` is exclusive.
- **Pages are 1-based.** A page *label* is the document's own name for a page ("iv", "A-3"); it is
  ``None`` when the document defines none.
- **Boxes are in page coordinates**: PDF points (1/72 inch) for PDFs, pixels for images, with the
  origin at the top-left corner of the page and y growing downward.

This module holds structure, not presentation: no wire formats, no formatted strings, no logic
beyond validation. It imports nothing from citewell. Its last part holds the working types that
cross layers inside one process (the evidence a generator answers from, a page's character
boxes, a chunk before it is stored, a background ingest's record); the question and the stream
events of an answer are in ``events.py``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, ClassVar, Literal, Self

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "Agent",
    "Answer",
    "ApiKey",
    "Box",
    "Bucket",
    "CharBoxes",
    "CharConfidences",
    "Chunk",
    "ChunkDraft",
    "Citation",
    "CitedSource",
    "Claim",
    "Comparison",
    "CompoundFilter",
    "Conflict",
    "ConflictSide",
    "conflict_sides",
    "ConversationTurn",
    "DeclineRule",
    "Evidence",
    "EvidenceSentence",
    "Filter",
    "GroundingState",
    "IngestJob",
    "IngestOutcome",
    "IngestResult",
    "JobState",
    "MetadataValue",
    "Modality",
    "NOT_READ",
    "Page",
    "PageRegion",
    "PartConflict",
    "PartReading",
    "Passage",
    "Permission",
    "Principal",
    "QuestionPart",
    "ReadSentence",
    "Redaction",
    "RetrievalMode",
    "ScoreBreakdown",
    "SearchRequest",
    "SentenceChoice",
    "SentenceMatch",
    "Source",
    "SourceStatus",
    "Span",
    "StoredAnswer",
    "Tenant",
    "Trace",
    "Turn",
    "Verdict",
    "WordAnswer",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Redaction = Literal["email", "card_number", "phone"]
"""A kind of personal data an agent can mask (``citewell.redact``)."""
ConflictSide = Literal["current", "older", "undated"]
"""Which side of a disagreement between sources a passage is on (``Answer.conflict_sides``)."""

MetadataValue = str | int | float | bool
"""A value a source's metadata may hold (the same types as OpenAI vector-store attributes)."""


class Span(_Model):
    """A range of one text, in code points: ``text[start:end]``."""

    start: int = Field(ge=0, description="First code point of the range (inclusive).")
    end: int = Field(ge=0, description="Code point after the range (exclusive).")

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.end < self.start:
            raise ValueError(f"span end {self.end} precedes start {self.start}")
        return self

    def __len__(self) -> int:
        return self.end - self.start

    def overlaps(self, other: Span) -> bool:
        """Whether the two ranges share at least one code point."""
        return self.start < other.end and other.start < self.end

    def contains(self, other: Span) -> bool:
        return self.start <= other.start and other.end <= self.end


class Modality(StrEnum):
    """What a page (or a whole source) is made of, which decides how it can be cited."""

    TEXT = "text"
    """Text only: cited by character range (and page and boxes for PDFs)."""
    MULTIMODAL = "multimodal"
    """A page with a text layer and images."""
    IMAGE = "image"
    """Pixels only; its text comes from OCR."""


class Box(_Model):
    """A rectangle on a page, in page coordinates (see the module docstring)."""

    x0: float = Field(description="Left edge.")
    y0: float = Field(description="Top edge.")
    x1: float = Field(description="Right edge.")
    y1: float = Field(description="Bottom edge.")


class PageRegion(_Model):
    """The part of a cited range that lies on one page, as boxes: one per line of text."""

    page_number: int = Field(ge=1, description="1-based page the boxes lie on.")
    page_label: str | None = Field(default=None, description="That page's own label, if any.")
    page_width: float = Field(gt=0, description="Page width in page coordinates.")
    page_height: float = Field(gt=0, description="Page height in page coordinates.")
    boxes: tuple[Box, ...] = Field(
        min_length=1,
        description="Boxes covering the range's characters on the page, in text order.",
    )
    ocr_confidence: int | None = Field(
        default=None,
        ge=0,
        le=100,
        description="How sure OCR was of the least certain word of the range on this page, "
        "0-100; None where the page's own text layer was read.",
    )


class Page(_Model):
    """One page of a paginated source, and the range of the canonical text it holds."""

    number: int = Field(ge=1, description="1-based position of the page in the document.")
    label: str | None = Field(
        default=None, description="The document's own label for the page, None when it has none."
    )
    span: Span = Field(description="Range of the source's canonical text on this page.")
    width: float = Field(gt=0, description="Page width in page coordinates.")
    height: float = Field(gt=0, description="Page height in page coordinates.")
    modality: Modality = Field(default=Modality.TEXT, description="What the page is made of.")
    ocr_confidence: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description="How sure OCR was of the page's words, 0-100 (their mean confidence, "
        "weighted by length); None when the page's own text layer was read.",
    )


class SourceStatus(StrEnum):
    """Where a source is in its life. Only ``ready`` sources are searched or cited."""

    READY = "ready"


class Source(_Model):
    """One version of one original file in a bucket."""

    id: str = Field(description="Stable identifier, 'src_' followed by hex digits.")
    bucket_id: str = Field(description="The bucket the source belongs to.")
    filename: str = Field(description="Name of the original file; versions share it.")
    mime_type: str = Field(description="Media type of the original file.")
    content_hash: str = Field(description="SHA-256 of the original bytes, hex.")
    byte_size: int = Field(ge=0, description="Size of the original file in bytes.")
    version: int = Field(ge=1, description="1 for the first file of this name in the bucket.")
    supersedes: str | None = Field(default=None, description="Id of the previous version.")
    superseded_by: str | None = Field(
        default=None, description="Id of the next version; None for the current version."
    )
    status: SourceStatus = Field(default=SourceStatus.READY, description="Life-cycle state.")
    title: str | None = Field(default=None, description="Title found in the document, if any.")
    language: str | None = Field(
        default=None, description="Main language, ISO 639-1 ('en', 'es', 'zh'), if detected."
    )
    modality: Modality = Field(default=Modality.TEXT, description="What the source is made of.")
    page_count: int | None = Field(
        default=None, description="Number of pages; None for sources without pages."
    )
    char_count: int = Field(ge=0, description="Length of the canonical text in code points.")
    chunk_count: int = Field(ge=0, description="Number of retrievable passages (chunks).")
    effective_date: dt.date | None = Field(
        default=None, description="Date from which the content applies, when the owner gave one."
    )
    acl: frozenset[str] = Field(
        default=frozenset(),
        description="Labels of which a principal must hold one to see the source; "
        "empty means everyone with access to the bucket.",
    )
    metadata: dict[str, MetadataValue] = Field(
        default_factory=dict, description="Owner-supplied attributes, usable in filters."
    )
    created_at: dt.datetime = Field(description="When this version was ingested (UTC).")

    @property
    def is_current(self) -> bool:
        return self.superseded_by is None


class IngestOutcome(StrEnum):
    """What ingesting one file did."""

    CREATED = "created"
    """A file of a new name: version 1."""
    NEW_VERSION = "new_version"
    """Other bytes under an existing name: a new version superseding the current one."""
    UNCHANGED = "unchanged"
    """The bucket already holds these exact bytes; nothing was stored."""


class IngestResult(_Model):
    """The outcome of ingesting one file."""

    outcome: IngestOutcome = Field(description="What happened.")
    source: Source = Field(
        description="The stored source; for 'unchanged', the one already holding these bytes."
    )
    superseded: Source | None = Field(
        default=None, description="The version this one replaced, for 'new_version'."
    )


class Bucket(_Model):
    """A named set of sources: the unit of scope for search, answers and permissions."""

    id: str = Field(description="Stable identifier, 'bkt_' followed by hex digits.")
    tenant_id: str = Field(description="The workspace that owns the bucket.")
    slug: str = Field(description="Name used in URLs and on the command line, unique per tenant.")
    name: str = Field(description="Human-readable name.")
    created_at: dt.datetime = Field(description="When the bucket was created (UTC).")


class Chunk(_Model):
    """A retrievable passage: whole sentences of one source, inside one structural section."""

    id: str = Field(description="Stable identifier, derived from the source id and the index.")
    source_id: str = Field(description="The source the passage belongs to.")
    index: int = Field(ge=0, description="Position of the chunk within its source.")
    span: Span = Field(description="Range of the source's canonical text.")
    text: str = Field(description="The canonical text of the range.")
    heading_path: tuple[str, ...] = Field(
        default=(), description="Headings enclosing the chunk, outermost first."
    )
    page_numbers: tuple[int, ...] = Field(
        default=(), description="Pages the chunk lies on, ascending; empty without pages."
    )
    sentences: tuple[Span, ...] = Field(
        description="Sentence ranges within the chunk, in source coordinates."
    )
    language: str | None = Field(
        default=None, description="Language of the chunk, ISO 639-1, if detected."
    )


class Permission(StrEnum):
    """What an API key lets its holder do, within its tenant (and its buckets, if restricted)."""

    ASK = "ask"
    """Ask for answers: Responses, Chat Completions, Messages."""
    SEARCH = "search"
    """Retrieve without generation, and read sources' text and originals."""
    INGEST = "ingest"
    """Add sources and upload files."""
    MANAGE = "manage"
    """Create and change buckets, agents and keys."""
    EXPORT = "export"
    """Download bucket archives."""
    DELETE = "delete"
    """Delete sources, files and buckets."""


class Tenant(_Model):
    """A workspace: it owns buckets, agents and keys, and nothing crosses its boundary."""

    DEFAULT_ID: ClassVar[str] = "default"

    id: str = Field(description="'default', or 'ten_' followed by hex digits.")
    name: str = Field(description="Human-readable name.")
    created_at: dt.datetime = Field(description="When the tenant was created (UTC).")


class ApiKey(_Model):
    """An API key as stored: what it allows, never the secret (only its hash is kept)."""

    id: str = Field(description="'key_' followed by hex digits; the key's public part.")
    tenant_id: str = Field(description="The tenant the key acts in.")
    name: str = Field(default="", description="What the key is for.")
    permissions: frozenset[Permission] = Field(description="What the key may do.")
    bucket_ids: frozenset[str] | None = Field(
        default=None, description="Buckets the key is restricted to; None for all of the tenant."
    )
    acl_labels: frozenset[str] | None = Field(
        default=None,
        description="Labels matched against sources' ACLs; None: the key sees every source.",
    )
    created_at: dt.datetime = Field(description="When the key was created (UTC).")
    revoked_at: dt.datetime | None = Field(default=None, description="When it was revoked.")


class Principal(_Model):
    """Who is asking. Decides which buckets and which ACL-labelled sources are visible, and what
    the caller may do."""

    tenant_id: str = Field(default=Tenant.DEFAULT_ID, description="The caller's workspace.")
    acl_labels: frozenset[str] = Field(
        default=frozenset(), description="Labels the caller holds, matched against source ACLs."
    )
    sees_all_labels: bool = Field(
        default=False, description="Whether ACL labels are ignored (an owner or the local user)."
    )
    bucket_ids: frozenset[str] | None = Field(
        default=None, description="Buckets the caller is restricted to; None for all of the tenant."
    )
    permissions: frozenset[Permission] = Field(
        default=frozenset(Permission), description="What the caller may do."
    )
    key_id: str | None = Field(
        default=None, description="The API key the caller presented; None for the local user."
    )

    @property
    def sees_everything(self) -> bool:
        """Whether every source of the tenant is visible: no bucket restriction, no ACL."""
        return self.sees_all_labels and self.bucket_ids is None

    @classmethod
    def local(cls) -> Principal:
        """The single user of an embedded installation: may do everything in the default
        tenant, and sees every source of it."""
        return cls(sees_all_labels=True)

    @classmethod
    def of_key(cls, key: ApiKey) -> Principal:
        return cls(
            tenant_id=key.tenant_id,
            acl_labels=key.acl_labels or frozenset(),
            sees_all_labels=key.acl_labels is None,
            bucket_ids=key.bucket_ids,
            permissions=key.permissions,
            key_id=key.id,
        )

    def can_see(self, acl: frozenset[str]) -> bool:
        """Whether a source with these ACL labels is visible to this principal."""
        return self.sees_all_labels or not acl or not acl.isdisjoint(self.acl_labels)


class Comparison(_Model):
    """Compares one attribute of a source with a value (OpenAI's ``ComparisonFilter``).

    ``key`` is a metadata key, or one of the built-in attributes ``filename``, ``mime_type``,
    ``language``, ``modality``, ``effective_date`` (ISO date), ``source_id``.
    """

    type: Literal["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"] = Field(
        description="The comparison operator."
    )
    key: str = Field(min_length=1, description="The attribute compared.")
    value: MetadataValue | list[MetadataValue] = Field(
        description="The value compared with; a list for 'in' and 'nin'."
    )


class CompoundFilter(_Model):
    """Combines filters with 'and' or 'or' (OpenAI's ``CompoundFilter``)."""

    type: Literal["and", "or"] = Field(description="How the filters combine.")
    filters: list[Filter] = Field(description="The filters combined.")


Filter = Annotated[Comparison | CompoundFilter, Field(discriminator="type")]


class RetrievalMode(StrEnum):
    """Which retrievers take part in a search."""

    HYBRID = "hybrid"
    LEXICAL = "lexical"
    DENSE = "dense"


class SearchRequest(_Model):
    """A search without generation."""

    query: str = Field(min_length=1, max_length=4000, description="What to look for.")
    bucket_ids: tuple[str, ...] = Field(
        min_length=1, description="Buckets searched, by id or slug."
    )
    filters: Filter | None = Field(default=None, description="Conditions on source attributes.")
    max_results: int = Field(default=10, ge=1, le=100, description="Most passages returned.")
    mode: RetrievalMode = Field(default=RetrievalMode.HYBRID, description="Retrievers used.")
    include_superseded: bool = Field(
        default=False, description="Whether older versions of files are searched too."
    )


class ScoreBreakdown(_Model):
    """How a passage scored in each retriever and after fusion."""

    fused: float = Field(description="Fused score in [0, 1]; results are ranked by it.")
    lexical: float | None = Field(default=None, description="BM25 score; None if not matched.")
    lexical_rank: int | None = Field(default=None, description="1-based rank in the BM25 list.")
    dense: float | None = Field(default=None, description="Cosine similarity; None if not ranked.")
    dense_rank: int | None = Field(default=None, description="1-based rank in the dense list.")


class SentenceMatch(_Model):
    """A sentence of a retrieved passage that matches the query."""

    span: Span = Field(description="Range of the sentence in the source's canonical text.")
    text: str = Field(description="The sentence.")
    score: float = Field(description="How well the sentence matches the query, in [0, 1].")
    page_number: int | None = Field(default=None, description="Page the sentence starts on.")
    page_label: str | None = Field(default=None, description="Label of that page.")


class Passage(_Model):
    """One search result: a chunk, its source, its scores and its best sentences."""

    chunk: Chunk = Field(description="The retrieved chunk.")
    source: Source = Field(description="The source version the chunk belongs to.")
    scores: ScoreBreakdown = Field(description="Scores per retriever and fused.")
    sentences: tuple[SentenceMatch, ...] = Field(
        description="The chunk's sentences that best match the query, best first."
    )
    page_number: int | None = Field(default=None, description="First page of the chunk.")
    page_label: str | None = Field(default=None, description="Label of that page.")
    pages: tuple[Page, ...] = Field(
        default=(),
        exclude=True,
        description="The source's pages, read with the passage so that an answer citing it "
        "reads them no more; never sent.",
    )


class Agent(_Model):
    """A named way of answering: which sources it may use, and how it answers from them."""

    DEFAULT_NAME: ClassVar[str] = "citewell-agent"

    name: str = Field(default=DEFAULT_NAME, description="Name clients give as `model`.")
    description: str = Field(default="", description="What the agent is for.")
    bucket_ids: tuple[str, ...] = Field(
        default=(), description="Buckets the agent answers from; empty: every visible bucket."
    )
    filters: Filter | None = Field(default=None, description="Conditions on source attributes.")
    generator: str = Field(
        default="extractive", description="Registered generator that writes the answer."
    )
    model: str | None = Field(default=None, description="Model name passed to the generator.")
    max_passages: int = Field(default=8, ge=1, le=50, description="Passages read as evidence.")
    max_sources: int = Field(
        default=5, ge=1, le=50, description="Most sources cited in one answer."
    )
    answerable_threshold: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Least probability, by the reader, that the sources answer a part of the "
        "question for it to be answered; below it for every part, the reader declines (where "
        "it decides: `declined_by`). None: the decline rule on the reader's card for the "
        "question's language, chosen when it was calibrated to decline the most unanswerable "
        "questions while declining at most 8 % of the answerable ones of articles it never "
        "trained on, read as the engine reads them (a threshold no higher where word overlap "
        "would answer the part too). Higher: fewer answers, more of them right.",
    )
    declined_by: Literal["auto", "reader", "generator"] = Field(
        default="auto",
        description="Who decides that the sources do not answer: 'reader' (below "
        "`answerable_threshold`, the agent declines before any generator is asked), "
        "'generator' (the generator gets the evidence, best-read first, and declines itself: "
        "a model replies that the sources do not answer), or 'auto': the generator where it "
        "can judge (a model), else the reader (the extractive generator).",
    )
    support_threshold: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Least support score a citation needs to be kept. None: the verifier's "
        "own for the question's language — the reader's card's, chosen when it was calibrated "
        "where the citations of supported and unsupported claims of articles it never trained "
        "on are best told apart (the most of the first kept plus of the second dropped); 0.4 "
        "for the lexical verifier; 0.5 (even odds) for a model judge. Higher: fewer citations, "
        "more of them right.",
    )
    verifier: Literal["calibrated", "openai-compatible"] = Field(
        default="calibrated",
        description="What scores each citation: 'calibrated' (a local model of word, number, "
        "name and negation agreement) or 'openai-compatible' (the OpenAI-compatible model of "
        "the agent, else the configured one, asked whether the cited text supports the claim; "
        "the score is its probability of 'yes').",
    )
    strict: bool = Field(
        default=False,
        description="Remove unsupported claims (and decline when too little remains) instead "
        "of keeping them uncited and flagged.",
    )
    show_sources: bool = Field(
        default=True, description="Whether answers show their sources ('hidden' grounding if not)."
    )
    refusal: str | None = Field(
        default=None,
        description="What the agent says when the sources do not answer; None: a plain sentence "
        "in the question's language.",
    )
    redact: tuple[Redaction, ...] = Field(
        default=(),
        description="Personal data masked, character for character, in everything the agent "
        "shows from the sources: its answers, cited text and results.",
    )


class GroundingState(StrEnum):
    """Whether an answer's sources may be shown."""

    AVAILABLE = "available"
    """Cited sources may be shown."""
    HIDDEN = "hidden"
    """The agent's policy hides sources."""
    MISSING = "missing"
    """The question needed sources and none supported an answer."""
    NONE = "none"
    """No grounding was attempted."""


class Claim(_Model):
    """A span of an answer's text that states something, usually one sentence."""

    span: Span = Field(description="Range of the answer text.")
    supported: bool = Field(description="Whether at least one kept citation supports the claim.")
    needs_citation: bool = Field(
        default=True,
        description="False for text that states nothing from the sources (a refusal, a preamble).",
    )


class Citation(_Model):
    """A claim of the answer pointing at the range of a source that supports it."""

    claim_index: int = Field(ge=0, description="Index of the cited claim in Answer.claims.")
    source_index: int = Field(
        ge=1, description="1-based number of the source in the answer, in order of first citation."
    )
    source_id: str = Field(description="The cited source version.")
    chunk_id: str = Field(description="The chunk holding the cited range.")
    span: Span = Field(description="Cited range of the source's canonical text.")
    cited_text: str = Field(description="Exactly the cited range of the canonical text.")
    page_number: int | None = Field(default=None, description="Page where the range starts.")
    page_label: str | None = Field(default=None, description="Label of that page.")
    support: float | None = Field(
        default=None, description="Verifier's support score in [0, 1]; None if not verified."
    )
    regions: tuple[PageRegion, ...] = Field(
        default=(),
        description="Where the range lies on its pages: one region per page, in page order; "
        "empty for sources without character boxes.",
    )
    conflict_side: ConflictSide | None = Field(
        default=None,
        description="The side of a disagreement between sources that the range states "
        "('current', 'older', or 'undated' when neither source is dated after the other); "
        "None when it states none.",
    )


class CitedSource(_Model):
    """A source as numbered within one answer."""

    source_index: int = Field(ge=1, description="1-based number, in order of first citation.")
    source: Source = Field(description="The source version.")


class Verdict(_Model):
    """The verifier's judgement of one candidate citation, kept or dropped (no text)."""

    claim_index: int = Field(ge=0, description="Index of the judged claim in Answer.claims.")
    chunk_id: str = Field(description="The chunk holding the candidate range.")
    source_id: str = Field(description="The source version of the candidate range.")
    span: Span = Field(description="Candidate range of the source's canonical text.")
    support: float = Field(ge=0, le=1, description="Verifier's support score in [0, 1].")
    kept: bool = Field(
        description="Whether the score reached the agent's support threshold (a kept candidate "
        "may still go uncited when the answer already cites its most sources)."
    )


class PartConflict(_Model):
    """Where two sources disagree on one part of the question (ranges, not their words)."""

    preferred_chunk_id: str = Field(description="The chunk of the sentence stated first.")
    preferred_span: Span = Field(description="That sentence's range of its source's text.")
    other_chunk_id: str = Field(description="The chunk of the sentence it disagrees with.")
    other_span: Span = Field(description="That sentence's range of its source's text.")
    decided: bool = Field(
        description="Whether the first is preferred as the current source (a later "
        "effective_date), or neither source is dated after the other."
    )

    @classmethod
    def located(cls, evidence: Evidence, conflict: Conflict) -> PartConflict:
        """The ``conflict`` between two sentences of ``evidence``, as chunks and ranges."""
        preferred, other = (evidence.sentences[n - 1] for n in (conflict.preferred, conflict.other))
        return cls(
            preferred_chunk_id=evidence.passages[preferred.passage_index].chunk.id,
            preferred_span=preferred.span,
            other_chunk_id=evidence.passages[other.passage_index].chunk.id,
            other_span=other.span,
            decided=conflict.decided,
        )


class QuestionPart(_Model):
    """One thing the question asks ("How much is it, and when is it open?" asks two), in the
    question's order, as the reader judged the evidence for it (its words are not kept: a trace
    holds ids and scores only)."""

    answerable: float = Field(
        ge=0, le=1, description="The reader's probability that the evidence answers this part."
    )
    answered: bool = Field(description="Whether that reached the agent's answerable threshold.")
    conflict: PartConflict | None = Field(
        default=None,
        description="Two sources that answer this part with different values; None if none do.",
    )


class ReadSentence(_Model):
    """The reader's score of one evidence sentence as an answer to one part of the question."""

    part: int = Field(ge=0, description="Index of the part in Trace.question_parts.")
    chunk_id: str = Field(description="The chunk holding the sentence.")
    span: Span = Field(description="Range of the source's canonical text.")
    answers: float = Field(ge=0, le=1, description="Probability that the sentence answers it.")


class Trace(_Model):
    """What happened while answering, kept for evaluation and audit (ids and scores only)."""

    retrieved_chunk_ids: tuple[str, ...] = Field(default=(), description="Retrieved, ranked.")
    cited_chunk_ids: tuple[str, ...] = Field(default=(), description="Cited, in citation order.")
    verdicts: tuple[Verdict, ...] = Field(
        default=(), description="Every candidate citation the verifier judged, in judging order."
    )
    question_parts: tuple[QuestionPart, ...] = Field(
        default=(), description="What the question asks, part by part; empty if no reader read."
    )
    read_sentences: tuple[ReadSentence, ...] = Field(
        default=(), description="Every sentence the reader read, best first within each part."
    )
    timings_ms: dict[str, float] = Field(default_factory=dict, description="Stage durations.")
    settings_fingerprint: str = Field(default="", description="Hash of the settings in force.")


class Answer(_Model):
    """The one internal answer that every API surface renders."""

    id: str = Field(description="Stable identifier of the answer, 'ans_' followed by hex digits.")
    agent: str = Field(description="Name of the agent that answered.")
    question: str = Field(description="The question answered.")
    text: str = Field(description="The answer as flat text, with no citation markers.")
    claims: tuple[Claim, ...] = Field(default=(), description="Claims, in text order.")
    citations: tuple[Citation, ...] = Field(
        default=(), description="Citations, in text order (by claim, then by source_index)."
    )
    sources: tuple[CitedSource, ...] = Field(
        default=(), description="Cited sources, ordered by source_index."
    )
    passages: tuple[Passage, ...] = Field(
        default=(), description="The passages retrieved as evidence, best first."
    )
    grounding: GroundingState = Field(description="Whether the sources may be shown.")
    declined: bool = Field(
        default=False, description="Whether the answer says the sources do not answer it."
    )
    created_at: dt.datetime = Field(description="When the answer was made (UTC).")
    trace: Trace = Field(default_factory=Trace, description="Ids, scores and timings.")

    def conflict_sides(self) -> dict[str, ConflictSide]:
        """The chunks on either side of a disagreement between sources it read (``sides``)."""
        return conflict_sides(p.conflict for p in self.trace.question_parts)


def conflict_sides(conflicts: Iterable[PartConflict | None]) -> dict[str, ConflictSide]:
    """The chunks on either side of these disagreements, by chunk id: 'current' and 'older'
    where one source is dated after the other, 'undated' where neither is."""
    sides: dict[str, ConflictSide] = {}
    for conflict in conflicts:
        if conflict is None:
            continue
        preferred, other = _sides(conflict.decided)
        sides[conflict.preferred_chunk_id] = preferred
        sides[conflict.other_chunk_id] = other
    return sides


def _sides(decided: bool) -> tuple[ConflictSide, ConflictSide]:
    """What a disagreement's preferred and other sides are called: the current and the older
    where one source is dated after the other, else both undated."""
    return ("current", "older") if decided else ("undated", "undated")


# Working types: passed between layers inside one process, never serialised as they are. ------


@dataclass(frozen=True, slots=True)
class EvidenceSentence:
    """One sentence of a retrieved passage, numbered for the generator."""

    number: int
    """1-based; what the generator cites as ``[number]``."""
    passage_index: int
    """Index of its passage in ``Evidence.passages``."""
    span: Span
    """Range of the source's canonical text."""
    text: str


@dataclass(frozen=True, slots=True)
class Turn:
    """An earlier message of the conversation."""

    role: Literal["user", "assistant"]
    text: str


@dataclass(frozen=True, slots=True)
class WordAnswer:
    """What word overlap (the extractive generator's lexical choice) would answer a part with."""

    sentences: tuple[int, ...] = ()
    """Its sentences (evidence indices), first said first: one, or those that answer together
    (two neighbours, a table's rows); none where it declines."""
    typed: bool = True
    """Whether the first holds the kind of answer the part asks for (a date for "when", a name
    for "who"); true where it asks for no particular kind."""
    listed: bool = False
    """Whether they are a table's rows or a list's lead-in and items, which answer together
    ("When is the workshop open?": a row a day). They are said as they are whatever the reader's
    likeliest: it reads one sentence at a time, and never trained on a row or an item."""

    @property
    def sure(self) -> bool:
        """Whether it answers, with the kind of answer asked for: the agreement that lowers the
        reader's decline threshold (``DeclineRule``)."""
        return bool(self.sentences) and self.typed


@dataclass(frozen=True, slots=True)
class DeclineRule:
    """When the sources do not answer a part: the reader's answerability for it is below a
    threshold that is lower where word overlap would answer it too, with the kind of answer
    asked for (``WordAnswer.sure``). Two judges that agree need less certainty from either;
    where no sentence holds the part's words (or holds no name for "who"), the reader alone must
    be surer. Fitted per language on the reader's calibration part and kept in its card; an
    agent's own ``answerable_threshold`` is one threshold for both (``single``)."""

    worded: float = 0.5
    """The least answerability of a part that word overlap would answer too."""
    unworded: float = 0.5
    """The least answerability of a part that word overlap would decline, or answer with no
    answer of the kind asked for."""

    @classmethod
    def single(cls, threshold: float) -> DeclineRule:
        return cls(worded=threshold, unworded=threshold)

    def answers(self, answerability: float, *, worded: bool) -> bool:
        """Whether a part read this answerable is to be answered."""
        return answerability >= (self.worded if worded else self.unworded)


@dataclass(frozen=True, slots=True)
class SentenceChoice:
    """Which sentence answers a part the reader found answered: word overlap's pick, the
    reader's likeliest, or both. Fitted per language on the reader's calibration part (articles
    it never trained on) and kept in its card: where the two judges disagree, which one is more
    often right depends on the reader and the language. A threshold above 1 never applies.

    The choice never declines a part: whether a part is answered is the reader's decline rule's
    to say (``DeclineRule``, fitted at a stated false refusal), so where word overlap would
    decline it, the reader's likeliest answers it."""

    reader_first: float = 1.01
    """The reader's likeliest is said instead of word overlap's pick when it scores this."""
    both: float = 1.01
    """Otherwise, it is said after word overlap's pick (when that is another sentence) when it
    scores this."""

    def answer(self, word: WordAnswer, read: tuple[int, float] | None) -> list[int]:
        """The part's answer sentences, first said first, from word overlap's answer and the
        reader's likeliest with its score (None: nothing was read); a table's rows or a list
        that answer together are the answer (``WordAnswer.listed``)."""
        if word.listed:
            return list(word.sentences)
        if read is not None and (read[1] >= self.reader_first or not word.sentences):
            return [read[0]]
        picks = list(word.sentences)
        if read is not None and read[0] not in picks and read[1] >= self.both:
            picks.append(read[0])
        return picks


@dataclass(frozen=True, slots=True)
class PartReading:
    """What the reader made of the evidence for one part of the question."""

    text: str
    answerable: float
    """Probability that the sentences read answer this part."""
    answered: bool
    """Whether ``answerable`` reached the agent's threshold: the part is to be answered."""
    answers: tuple[tuple[int, float], ...]
    """(evidence sentence number, probability that it answers this part), best first; only
    the sentences read (the candidates), never a heading."""
    conflict: Conflict | None = None
    """Two of its best answers, of different sources, that give it different values."""


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two evidence sentences of different sources that answer one part differently."""

    preferred: int
    """Evidence number of the sentence to state first: the current source's, when one is."""
    other: int
    """Evidence number of the sentence it disagrees with."""
    values: tuple[str, str]
    """What each says where they differ, preferred first ("30 days", "14 days")."""
    decided: bool
    """Whether ``preferred`` is the current source's (a later ``effective_date``), or only the
    first read (neither source is dated after the other)."""

    def side_of(self, number: int) -> ConflictSide | None:
        """The side the sentence ``number`` states, None if it is neither."""
        preferred, other = _sides(self.decided)
        return {self.preferred: preferred, self.other: other}.get(number)


@dataclass(frozen=True, slots=True)
class Evidence:
    question: str
    language: str | None
    """Language of the question ('en', 'es', 'zh'), None if unknown."""
    passages: tuple[Passage, ...]
    sentences: tuple[EvidenceSentence, ...]
    """Every sentence of every passage, in passage order, numbered from 1."""
    history: tuple[Turn, ...] = ()
    instructions: str | None = None
    """The caller's system or developer instructions, if any."""
    reading: tuple[PartReading, ...] = ()
    """The reader's judgement, part by part of the question; empty where no trained reader
    read the evidence (then generators judge the sentences themselves)."""
    choice: SentenceChoice = SentenceChoice()
    """How a part's answer sentence is chosen, as the reader's card says for this language."""

    def conflict_side(self, numbers: Iterable[int]) -> ConflictSide | None:
        """The side of a disagreement between sources that these sentences state, if any."""
        for number in numbers:
            for part in self.reading:
                if part.conflict and (side := part.conflict.side_of(number)):
                    return side
        return None


CharBoxes = npt.NDArray[np.float32]
"""Boxes of a page's characters, shape (n, 4): x0, y0, x1, y1 in page coordinates.

Row i belongs to code point ``page.span.start + i``. Characters without a box of their own
(spaces and line breaks the parser inserted) hold NaN.
"""

CharConfidences = npt.NDArray[np.uint8]
"""How sure OCR was of the word each of a page's characters belongs to, 0-100, one per code point
like ``CharBoxes``; ``NOT_READ`` where OCR gave no word (the spaces and line breaks that join
words). Empty for a page OCR did not read: one byte per character is kept only where it tells
something.
"""

NOT_READ = 255


@dataclass(frozen=True, slots=True)
class ChunkDraft:
    """A chunk before it is stored: its range and structure, without ids."""

    span: Span
    heading_path: tuple[str, ...]
    page_numbers: tuple[int, ...]
    sentences: tuple[Span, ...]
    language: str | None


class JobState(StrEnum):
    QUEUED = "queued"
    """Waiting for a process: given back by one that stopped before the job ended."""
    RUNNING = "running"
    """Leased to a process, which reads the file (or died: then the lease runs out)."""
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class IngestJob:
    """One file being ingested in the background, as the source it will become: a snapshot of
    its row in the store.

    An ingest that needs OCR can take minutes, so ``Library.submit`` hands back a job as soon
    as OCR starts; the source is ``processing`` until it is stored. The process running the job
    holds a lease on its row, renewed while it works; once a lease runs out, any server on the
    same store may claim the job and read the file again from its saved bytes. Storing stays one
    atomic step at the end, under the id promised for the source."""

    source_id: str
    """The id the source gets when it is stored (the job's id)."""
    tenant_id: str
    bucket_id: str
    filename: str
    mime_type: str
    content_hash: str
    byte_size: int
    acl: frozenset[str]
    metadata: dict[str, MetadataValue]
    effective_date: dt.date | None
    created_at: dt.datetime
    state: JobState = JobState.RUNNING
    attempts: int = 1
    """Runs started, the one under way included."""
    pages_done: int = 0
    pages_total: int = 0
    """Pages to read with OCR (a PDF's pages with a text layer are not counted)."""
    result_id: str | None = None
    """Once ``done``, the source it ended with: its own, or the one the bucket held already
    (the bucket got the same bytes meanwhile)."""
    error: str | None = None
    """Why it failed, once ``failed``."""
    unreadable: bool = False
    """Whether it failed on the file itself (damaged, too large, unsupported) rather than on
    the server."""
    submitter_labels: frozenset[str] | None = None
    """The ACL labels its submitter sees (None: every label). The job runs within them: it
    finds the same bytes, and supersedes a version, only where its submitter could."""

    @property
    def active(self) -> bool:
        """Whether it has yet to end (queued or running)."""
        return self.state in (JobState.QUEUED, JobState.RUNNING)


ConversationTurn = tuple[Literal["user", "assistant"], str]
"""One earlier message of a conversation: who said it, and what."""


@dataclass(frozen=True, slots=True)
class StoredAnswer:
    """An answer as an API dialect sent it, kept to be read again by the id the client got."""

    id: str
    """The id the client was given (``resp_…``)."""
    tenant_id: str
    answer: Answer
    rendered: str
    """The JSON object the client was sent, as text: read back byte for byte."""
    conversation: tuple[ConversationTurn, ...] = ()
    """The turns before the answer's question, oldest first."""
    previous_id: str | None = None
    """The stored answer this one continues (``previous_response_id``): its conversation quotes
    that answer, so deleting a source that one holds text of deletes this one too."""
    key_id: str | None = None
    """The API key that asked (None: the local user). The answer holds what that key could see:
    another key reads it again only if it sees everything of the tenant."""
