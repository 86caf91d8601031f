"""The Store protocol: where sources, their text, chunks and vectors live, and how to search them.

Every search takes a ``Scope``, and the scope's principal, buckets, filters and version rule are
applied *inside* the query, before ranking: a passage the caller may not see never takes a place
in a result list.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from citewell.model import (
    Agent,
    Answer,
    ApiKey,
    Bucket,
    CharBoxes,
    CharConfidences,
    Chunk,
    ChunkDraft,
    Filter,
    IngestJob,
    MetadataValue,
    Modality,
    Page,
    Principal,
    ScoreBreakdown,
    Source,
    StoredAnswer,
    Tenant,
    Trace,
)

__all__ = [
    "AccessStore",
    "AnswerStore",
    "ChunkHit",
    "FusedHit",
    "Fusion",
    "JobStore",
    "Retention",
    "Scope",
    "SourceDraft",
    "SourceStore",
    "Store",
    "StoredTrace",
    "Vectors",
    "chunk_id",
    "job_interrupted",
    "new_id",
    "new_source_id",
    "sources_quoted",
]

Vectors = npt.NDArray[np.float32]
"""Unit-length embeddings, shape (n, dim)."""


def new_id(prefix: str) -> str:
    """A new random id: ``prefix``, an underscore and 24 hex digits."""
    return f"{prefix}_{secrets.token_hex(12)}"


def new_source_id() -> str:
    return new_id("src")


@dataclass(frozen=True, slots=True)
class Retention:
    """How many days a store keeps each answer's trace and each stored answer (the privacy
    settings); 0 keeps none."""

    traces: int = 30
    answers: int = 30

    def __post_init__(self) -> None:
        if min(self.traces, self.answers) < 0:
            raise ValueError("retention days must be >= 0")


@dataclass(frozen=True, slots=True)
class SourceDraft:
    """Everything stored for one new source version, written in one atomic step."""

    bucket_id: str
    filename: str
    mime_type: str
    content: bytes
    content_hash: str
    text: str
    chunks: tuple[ChunkDraft, ...]
    vectors: Vectors
    """One row per chunk, from the embedder named by ``embedder``."""
    vector_keys: tuple[str, ...]
    """Per chunk, the hash of the exact text embedded: vectors are cached under it."""
    embedder: str
    pages: tuple[Page, ...] = ()
    char_boxes: tuple[CharBoxes, ...] = ()
    char_confidences: tuple[CharConfidences, ...] = ()
    """Aligned with ``pages`` when OCR read any of them, else empty."""
    title: str | None = None
    language: str | None = None
    modality: Modality = Modality.TEXT
    effective_date: dt.date | None = None
    acl: frozenset[str] = frozenset()
    metadata: dict[str, MetadataValue] = field(default_factory=dict)
    id: str = field(default_factory=new_source_id)
    """The id the source gets: a new one, or the one promised before it is stored (a background
    ingest)."""
    writer: Principal = field(default_factory=Principal.local)
    """Who stores it: it supersedes only a version of its filename that the writer sees."""


def chunk_id(source_id: str, index: int) -> str:
    """The id of a source's chunk at ``index``."""
    return f"chk_{source_id.removeprefix('src_')}_{index}"


def job_interrupted(attempts: int) -> str:
    """Why a job failed whose process stopped on every attempt."""
    return f"the ingest was interrupted {attempts} times: the servers reading it stopped"


def sources_quoted(answer: Answer) -> set[str]:
    """Ids of the sources whose text the answer holds: cited, listed or retrieved."""
    return (
        {c.source_id for c in answer.citations}
        | {s.source.id for s in answer.sources}
        | {p.source.id for p in answer.passages}
    )


@dataclass(frozen=True, slots=True)
class StoredTrace:
    """An answer's trace, kept for audit without any text: no question, answer or cited text."""

    answer_id: str
    """``Answer.id``: ans_…"""
    agent: str
    created_at: dt.datetime
    """When the answer was made (UTC); the retention counts from it."""
    trace: Trace


@dataclass(frozen=True, slots=True)
class Scope:
    """What a search may see. Required on every search path."""

    principal: Principal
    bucket_ids: tuple[str, ...]
    """Buckets searched; intersected with the principal's own restriction."""
    filters: Filter | None = None
    include_superseded: bool = False
    """Whether older versions of a file are searched too (normally only the current one)."""


@dataclass(frozen=True, slots=True)
class ChunkHit:
    chunk_id: str
    score: float
    """BM25 score (lexical) or cosine similarity (dense)."""


@dataclass(frozen=True, slots=True)
class FusedHit:
    chunk_id: str
    scores: ScoreBreakdown


@dataclass(frozen=True, slots=True)
class Fusion:
    """How lexical and dense rankings are combined (see ``store/fusion.py``)."""

    method: Literal["rrf", "convex"] = "rrf"
    """'rrf': weighted reciprocal-rank fusion; 'convex': weighted sum of normalised scores."""
    lexical_weight: float = 0.5
    """Weight of the lexical list; the dense list gets 1 - lexical_weight."""
    rrf_k: int = 60
    candidates: int = 100
    """Hits taken from each retriever before fusion."""


class SourceStore(Protocol):
    """Buckets and sources, with their text, pages, chunks and vectors, and search over them.

    Writes are atomic per source: after a crash at any point, a source is either fully stored
    and searchable or absent. Methods raise ``NotFound`` for unknown ids and ``StoreError`` when
    the backend fails.
    """

    # buckets -------------------------------------------------------------------------------
    def create_bucket(self, slug: str, *, tenant_id: str, name: str | None = None) -> Bucket:
        """Create the bucket, or return the existing one with this slug (idempotent)."""
        ...

    def get_bucket(self, id_or_slug: str, *, tenant_id: str) -> Bucket: ...

    def list_buckets(self, *, tenant_id: str) -> list[Bucket]: ...

    def rename_bucket(
        self, bucket_id: str, *, slug: str | None = None, name: str | None = None
    ) -> Bucket:
        """Give the bucket a new slug and/or name (None keeps the current one).

        Raises ``Conflict`` when another bucket of its tenant has the slug.
        """
        ...

    def delete_bucket(self, bucket_id: str) -> None:
        """Delete the bucket with all its sources, as ``delete_source`` deletes each."""
        ...

    # sources -------------------------------------------------------------------------------
    def find_sources(self, bucket_id: str, content_hash: str) -> list[Source]:
        """The sources in the bucket with exactly these bytes (under different ACL labels,
        there may be several), oldest first."""
        ...

    def add_source(self, draft: SourceDraft) -> Source:
        """Store a new source version atomically.

        If the bucket holds a current version with the same filename that the draft's writer
        sees, the new source supersedes it (the newest, if several); both stay addressable.
        Raises ``Conflict`` if the bucket already holds these bytes under the same ACL labels.
        """
        ...

    def get_source(self, source_id: str) -> Source: ...

    def get_sources(self, source_ids: Iterable[str]) -> dict[str, Source]: ...

    def list_sources(self, bucket_id: str, *, include_superseded: bool = False) -> list[Source]: ...

    def delete_source(self, source_id: str) -> None:
        """Delete one version with its text, chunks, (unless shared) its original file, and
        every stored answer that holds its text (see ``put_answer``)."""
        ...

    def source_text(self, source_id: str) -> str: ...

    def source_pages(self, source_id: str) -> tuple[Page, ...]: ...

    def char_boxes(self, source_id: str, page_number: int) -> CharBoxes: ...

    def char_confidences(self, source_id: str, page_number: int) -> CharConfidences:
        """Empty when OCR did not read the page."""
        ...

    def original(self, source_id: str) -> bytes: ...

    def get_chunks(self, chunk_ids: Sequence[str]) -> dict[str, Chunk]: ...

    # vectors -------------------------------------------------------------------------------
    def cached_vectors(self, embedder: str, keys: Sequence[str]) -> dict[str, Vectors]:
        """Vectors already computed by ``embedder`` for these text hashes."""
        ...

    def chunks_without_vectors(self, embedder: str, *, limit: int) -> list[tuple[str, Chunk]]:
        """Up to ``limit`` (vector key, chunk) pairs with no vector from ``embedder`` yet."""
        ...

    def put_vectors(self, embedder: str, keys: Sequence[str], vectors: Vectors) -> None: ...

    # search --------------------------------------------------------------------------------
    def search_lexical(self, query: str, scope: Scope, *, limit: int) -> list[ChunkHit]: ...

    def search_dense(self, vector: Vectors, scope: Scope, *, limit: int) -> list[ChunkHit]: ...

    def search_hybrid(
        self, query: str, vector: Vectors, scope: Scope, *, limit: int, fusion: Fusion
    ) -> list[FusedHit]: ...


class JobStore(Protocol):
    """Background ingests (``Library.submit``, ``citewell.jobs``). A lease is held by an
    ``owner`` (one process) until it runs out; claims are exclusive, and writes by an owner
    whose lease was taken over are ignored."""

    def add_job(self, job: IngestJob, content: bytes, *, owner: str, lease_seconds: float) -> None:
        """Keep a new job, running and leased to ``owner``, after the file's bytes."""
        ...

    def get_job(self, job_id: str) -> IngestJob:
        """``NotFound`` for an unknown (or forgotten) id."""
        ...

    def list_jobs(self, bucket_id: str) -> list[IngestJob]:
        """The bucket's jobs, those under way and those kept after they ended, oldest first."""
        ...

    def find_jobs(self, bucket_id: str, content_hash: str) -> list[IngestJob]:
        """The jobs under way that ingest these bytes into the bucket, oldest first."""
        ...

    def job_content(self, job_id: str) -> bytes:
        """The bytes of the job's file; ``NotFound`` when they are gone."""
        ...

    def claim_job(self, *, owner: str, lease_seconds: float, max_attempts: int) -> IngestJob | None:
        """Lease to ``owner`` the oldest job that is queued or whose lease ran out, counting
        one more attempt; None when there is none. A job whose lease ran out after
        ``max_attempts`` runs fails instead. No two owners ever hold the same lease."""
        ...

    def renew_jobs(self, *, owner: str, lease_seconds: float) -> None:
        """Extend every lease ``owner`` holds to ``lease_seconds`` from now."""
        ...

    def job_progress(self, job_id: str, *, owner: str, done: int, total: int) -> bool:
        """Record the pages read so far. False when ``owner`` no longer runs the job (it was
        deleted, or taken over): the caller stops reading."""
        ...

    def ocr_backlog(self, tenant_id: str) -> int:
        """Pages the tenant's jobs under way have yet to read."""
        ...

    def finish_job(
        self,
        job_id: str,
        *,
        owner: str,
        result_id: str | None = None,
        error: str | None = None,
        unreadable: bool = False,
    ) -> bool:
        """End a job: ``done`` with the source it ended with, or ``failed`` with ``error``
        (the file's bytes are deleted unless a source or another job holds them). Keeps the
        newest ``KEPT_FINISHED`` ended jobs. False when ``owner`` no longer ran the job (it was
        deleted meanwhile: what it stored must go too)."""
        ...

    def release_jobs(self, *, owner: str) -> None:
        """Queue again, uncounted, every job ``owner`` runs: its process is stopping."""
        ...

    def delete_job(self, job_id: str) -> None:
        """Forget a job; one under way is cancelled (its runner stops at its next page, told by
        ``job_progress``, and stores nothing). ``NotFound`` for none."""
        ...


class AnswerStore(Protocol):
    """Answers kept to be read again by id, and the traces of how answers were made."""

    # answers -------------------------------------------------------------------------------
    def put_answer(self, stored: StoredAnswer) -> None:
        """Keep an answer under its id, until a source it holds text of is deleted: one it
        cites, lists or retrieved, or one the answer it continues holds. Raises ``Conflict`` if
        the id is taken."""
        ...

    def get_answer(self, answer_id: str, *, tenant_id: str) -> StoredAnswer:
        """The answer kept under this id; ``NotFound`` for unknown ids and other tenants'."""
        ...

    # traces --------------------------------------------------------------------------------
    def put_trace(self, stored: StoredTrace) -> None:
        """Keep an answer's trace for the retention the store was opened with (none for 0
        days), and drop the traces older than it."""
        ...

    def list_traces(self) -> list[StoredTrace]:
        """The traces kept, oldest first."""
        ...


class AccessStore(Protocol):
    """Who may ask: tenants, their API keys, and their agents."""

    # tenants and keys ------------------------------------------------------------------------
    def create_tenant(self, name: str) -> Tenant: ...

    def get_tenant(self, tenant_id: str) -> Tenant:
        """``NotFound`` for an unknown id."""
        ...

    def list_tenants(self) -> list[Tenant]:
        """Every tenant, the default one first, then by creation."""
        ...

    def put_key(self, key: ApiKey, secret_hash: str) -> None:
        """Keep a new key with the hash of its secret (never the secret)."""
        ...

    def get_key(self, key_id: str) -> tuple[ApiKey, str]:
        """A key and its secret's hash, revoked or not; ``NotFound`` for an unknown id."""
        ...

    def list_keys(self, tenant_id: str) -> list[ApiKey]:
        """The tenant's keys, revoked ones included, oldest first."""
        ...

    def revoke_key(self, key_id: str, *, tenant_id: str) -> ApiKey:
        """Revoke a key of the tenant (again is a no-op); ``NotFound`` for others'."""
        ...

    # agents ----------------------------------------------------------------------------------
    def put_agent(self, agent: Agent, *, tenant_id: str) -> None:
        """Keep a tenant's agent, replacing the one of the same name: the fields it set, so
        that those it left to the defaults follow them when they change."""
        ...

    def list_agents(self, *, tenant_id: str) -> list[Agent]:
        """The tenant's agents, in order of creation."""
        ...

    def delete_agent(self, name: str, *, tenant_id: str) -> None:
        """``NotFound`` for a name the tenant has no agent of."""
        ...


class Store(SourceStore, JobStore, AnswerStore, AccessStore, Protocol):
    """A store holds all four roles in one database; each user is typed by the role it needs."""

    def close(self) -> None: ...
