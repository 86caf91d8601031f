"""The library's records as JSON: buckets, sources and their pages, ingest results, tenants,
API keys, search results, and OpenAI's list envelope.

The HTTP API answers with these objects and the CLI's ``--json`` prints them, so both say the
same thing the same way; their fields' descriptions are the OpenAPI schema's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from citewell.locator import locator_label, source_label
from citewell.model import (
    ApiKey,
    Bucket,
    IngestJob,
    IngestOutcome,
    IngestResult,
    JobState,
    MetadataValue,
    Modality,
    Page,
    Passage,
    Permission,
    ScoreBreakdown,
    Source,
    Tenant,
)
from citewell.render.common import AccessUrl, passage_pictures

__all__ = [
    "BucketObject",
    "IngestResponse",
    "KeyObject",
    "ListObject",
    "PageObject",
    "ProgressObject",
    "ScoresObject",
    "SearchResult",
    "SearchResults",
    "SentenceObject",
    "SourceObject",
    "SpanObject",
    "TenantObject",
    "WireModel",
    "WireObject",
    "render_results",
]


class WireModel(BaseModel):
    """A JSON object citewell sends or accepts; unknown request fields are refused."""

    model_config = ConfigDict(extra="forbid")


class WireObject(WireModel):
    """An object with an id, as OpenAI's list items are."""

    id: str = Field(description="Stable identifier.")


T = TypeVar("T", bound=WireObject)


class ListObject(WireModel, Generic[T]):
    """OpenAI's list envelope. Everything fits in one page, so ``has_more`` is always false
    (the OpenAI SDK keeps paginating unless it reads an explicit false)."""

    object: Literal["list"] = "list"
    data: list[T] = Field(description="The items, in order.")
    first_id: str | None = Field(description="Id of the first item; null when empty.")
    last_id: str | None = Field(description="Id of the last item; null when empty.")
    has_more: Literal[False] = Field(default=False, description="Always false.")

    @classmethod
    def of(cls, items: Sequence[T]) -> ListObject[T]:
        return cls(
            data=list(items),
            first_id=items[0].id if items else None,
            last_id=items[-1].id if items else None,
        )


class BucketObject(WireObject):
    id: str = Field(description="Stable identifier, 'bkt_' followed by hex digits.")
    object: Literal["bucket"] = "bucket"
    slug: str = Field(description="Name used in URLs and on the command line.")
    name: str = Field(description="Human-readable name.")
    created_at: int = Field(description="When the bucket was created, in Unix seconds.")

    @classmethod
    def render(cls, bucket: Bucket) -> BucketObject:
        return cls(
            id=bucket.id,
            slug=bucket.slug,
            name=bucket.name,
            created_at=int(bucket.created_at.timestamp()),
        )


class TenantObject(WireObject):
    id: str = Field(description="'default', or 'ten_' followed by hex digits.")
    object: Literal["tenant"] = "tenant"
    name: str
    created_at: int = Field(description="Unix seconds.")

    @classmethod
    def render(cls, tenant: Tenant) -> TenantObject:
        return cls(id=tenant.id, name=tenant.name, created_at=int(tenant.created_at.timestamp()))


class KeyObject(WireObject):
    id: str = Field(description="'key_' followed by hex digits: safe to show and log.")
    object: Literal["api_key"] = "api_key"
    tenant_id: str
    name: str
    permissions: list[Permission] = Field(description="Sorted.")
    bucket_ids: list[str] | None = Field(description="Null: every bucket of the tenant.")
    acl_labels: list[str] | None = Field(description="Null: the key sees every source.")
    created_at: int = Field(description="Unix seconds.")
    revoked_at: int | None = Field(description="Unix seconds; null while the key is valid.")
    secret: str | None = Field(
        default=None, description="The token to send, in the creation response only."
    )

    @classmethod
    def render(cls, key: ApiKey, secret: str | None = None) -> KeyObject:
        return cls(
            id=key.id,
            tenant_id=key.tenant_id,
            name=key.name,
            permissions=sorted(key.permissions),
            bucket_ids=None if key.bucket_ids is None else sorted(key.bucket_ids),
            acl_labels=None if key.acl_labels is None else sorted(key.acl_labels),
            created_at=int(key.created_at.timestamp()),
            revoked_at=int(key.revoked_at.timestamp()) if key.revoked_at else None,
            secret=secret,
        )


class ProgressObject(WireModel):
    pages_done: int = Field(description="Pages read with OCR so far.")
    pages_total: int = Field(
        description="Pages to read with OCR (a PDF's pages with a text layer are not counted)."
    )


class SourceObject(WireObject):
    id: str = Field(description="Stable identifier of this version, 'src_' followed by hex digits.")
    object: Literal["source"] = "source"
    bucket_id: str
    filename: str = Field(description="Name of the original file; versions share it.")
    mime_type: str = Field(description="Media type of the original file.")
    content_hash: str = Field(description="SHA-256 of the original bytes, hex.")
    byte_size: int = Field(description="Size of the original file in bytes.")
    version: int | None = Field(
        description="1 for the first file of this name in the bucket; null until 'ready'."
    )
    supersedes: str | None = Field(description="Id of the previous version.")
    superseded_by: str | None = Field(description="Id of the next version; null when current.")
    status: Literal["ready", "processing", "failed"] = Field(
        description="Life-cycle state; only 'ready' sources are searched. 'processing': being "
        "read with OCR (see progress); 'failed': its ingest failed (see error), nothing is "
        "stored."
    )
    progress: ProgressObject | None = Field(
        default=None, description="Pages read with OCR so far; only while 'processing'."
    )
    error: str | None = Field(default=None, description="Why the ingest failed; only 'failed'.")
    title: str | None
    language: str | None = Field(description="ISO 639-1 code of the main language, if detected.")
    modality: Modality = Field(
        description="'text', 'multimodal' (some page has a text layer and images) or 'image' "
        "(pages of pixels only, read with OCR); 'image' while 'processing'."
    )
    page_count: int | None = Field(
        description="Number of pages; null for sources without pages, and until 'ready'."
    )
    char_count: int = Field(description="Length of the canonical text in code points.")
    chunk_count: int = Field(description="Number of retrievable passages (chunks).")
    effective_date: dt.date | None
    acl: list[str] = Field(description="Labels of which a caller must hold one; empty: everyone.")
    metadata: dict[str, MetadataValue]
    created_at: int = Field(description="When this version was ingested, in Unix seconds.")

    @classmethod
    def render(cls, source: Source) -> SourceObject:
        return cls(
            id=source.id,
            bucket_id=source.bucket_id,
            filename=source.filename,
            mime_type=source.mime_type,
            content_hash=source.content_hash,
            byte_size=source.byte_size,
            version=source.version,
            supersedes=source.supersedes,
            superseded_by=source.superseded_by,
            status=source.status.value,
            title=source.title,
            language=source.language,
            modality=source.modality,
            page_count=source.page_count,
            char_count=source.char_count,
            chunk_count=source.chunk_count,
            effective_date=source.effective_date,
            acl=sorted(source.acl),
            metadata=dict(source.metadata),
            created_at=int(source.created_at.timestamp()),
        )

    @classmethod
    def render_job(cls, job: IngestJob) -> SourceObject:
        """A source still being read, or whose ingest failed (a finished one is in the store)."""
        failed = job.state is JobState.FAILED
        return cls(
            id=job.source_id,
            bucket_id=job.bucket_id,
            filename=job.filename,
            mime_type=job.mime_type,
            content_hash=job.content_hash,
            byte_size=job.byte_size,
            version=None,
            supersedes=None,
            superseded_by=None,
            status="failed" if failed else "processing",
            progress=None
            if failed
            else ProgressObject(pages_done=job.pages_done, pages_total=job.pages_total),
            error=job.error,
            title=None,
            language=None,
            modality=Modality.IMAGE,
            page_count=None,
            char_count=0,
            chunk_count=0,
            effective_date=job.effective_date,
            acl=sorted(job.acl),
            metadata=dict(job.metadata),
            created_at=int(job.created_at.timestamp()),
        )


class IngestResponse(WireModel):
    outcome: IngestOutcome | Literal["processing"] = Field(
        description="created, new_version or unchanged; 'processing' (status 202) while the "
        "file is read with OCR."
    )
    source: SourceObject = Field(
        description="The stored version (unchanged: the one held; processing: the source it "
        "will be, to be polled with GET /v1/sources/{id})."
    )
    superseded: SourceObject | None = Field(description="The version replaced, for new_version.")

    @classmethod
    def render(cls, result: IngestResult) -> IngestResponse:
        return cls(
            outcome=result.outcome,
            source=SourceObject.render(result.source),
            superseded=SourceObject.render(result.superseded) if result.superseded else None,
        )

    @classmethod
    def render_job(cls, job: IngestJob) -> IngestResponse:
        return cls(outcome="processing", source=SourceObject.render_job(job), superseded=None)


class SpanObject(WireModel):
    start: int = Field(description="First code point (inclusive).")
    end: int = Field(description="Code point after the range (exclusive).")


class PageObject(WireModel):
    number: int = Field(description="1-based position of the page.")
    label: str | None = Field(description="The document's own label for the page, if any.")
    span: SpanObject = Field(description="Range of the canonical text on this page.")
    width: float = Field(description="Width in page coordinates (PDF points; pixels for images).")
    height: float
    modality: Modality
    ocr_confidence: float | None = Field(
        description="How sure OCR was of the page's words (0-100); null for a text layer."
    )

    @classmethod
    def render(cls, page: Page) -> PageObject:
        return cls(
            number=page.number,
            label=page.label,
            span=SpanObject(start=page.span.start, end=page.span.end),
            width=page.width,
            height=page.height,
            modality=page.modality,
            ocr_confidence=None if page.ocr_confidence is None else round(page.ocr_confidence, 1),
        )


class ScoresObject(WireModel):
    fused: float = Field(description="Fused score in [0, 1]; results are ranked by it.")
    lexical: float | None = Field(description="BM25 score; null if the passage did not match.")
    lexical_rank: int | None = Field(description="1-based rank among BM25 hits.")
    dense: float | None = Field(description="Cosine similarity; null if not ranked.")
    dense_rank: int | None = Field(description="1-based rank among dense hits.")

    @classmethod
    def render(cls, scores: ScoreBreakdown) -> ScoresObject:
        return cls(**scores.model_dump())


class SentenceObject(WireModel):
    start: int = Field(description="First code point of the sentence in the canonical text.")
    end: int = Field(description="Code point after the sentence (exclusive).")
    text: str
    score: float = Field(description="How well the sentence matches the query, in [0, 1].")
    page_number: int | None = Field(description="1-based page the sentence starts on.")
    page_label: str | None = Field(description="That page's own label, if the document has one.")


class SearchResult(WireModel):
    chunk_id: str
    source_id: str = Field(description="The source version the passage belongs to.")
    file_id: str = Field(description="The same as source_id, for clients of OpenAI file search.")
    bucket_id: str
    filename: str
    label: str = Field(description="How to name the passage to a reader: 'handbook.pdf (p. 4)'.")
    page_number: int | None = Field(description="1-based page the passage starts on.")
    page_label: str | None = Field(description="That page's own label, if the document has one.")
    locator_label: str | None = Field(
        description="Where the passage lies: 'p. 4' (the page's label if it has one, as 'p. iv'), "
        "or for sources without pages the innermost heading ('§ Refunds'); else null."
    )
    modality: Modality = Field(description="What the source is made of.")
    mime_type: str
    text: str = Field(description="The passage: exactly text[span.start:span.end] of the source.")
    score: float = Field(description="Fused score in [0, 1].")
    scores: ScoresObject
    span: SpanObject = Field(description="Range of the source's canonical text, in code points.")
    heading_path: list[str] = Field(description="Headings enclosing the passage, outermost first.")
    pages: list[int] = Field(description="Pages the passage lies on; empty without pages.")
    sentences: list[SentenceObject] = Field(description="Best-matching sentences, best first.")
    source: SourceObject
    access_url: str | None = Field(
        description="A signed link opening the source's original file, without a key, for a "
        "while (GET /v1/links/{token}); null from `citewell search --json`, which serves none."
    )
    image_url: str | None = Field(
        description="A signed link to a picture of the page the best sentence starts on "
        "(`?width=`, `?format=webp`); null for sources without pages, and from the CLI."
    )
    highlight_url: str | None = Field(
        description="The same picture with the best sentence's boxes tinted (`?crop=true`: only "
        "around them); null where image_url is."
    )

    @classmethod
    def render(cls, passage: Passage, access_url: AccessUrl | None) -> SearchResult:
        chunk, source = passage.chunk, passage.source
        image_url, highlight_url = passage_pictures(passage, access_url) or (None, None)
        locator = locator_label(
            page_number=passage.page_number,
            page_label=passage.page_label,
            heading_path=chunk.heading_path,
        )
        return cls(
            chunk_id=chunk.id,
            source_id=source.id,
            file_id=source.id,
            bucket_id=source.bucket_id,
            filename=source.filename,
            label=source_label(source.filename, locator),
            page_number=passage.page_number,
            page_label=passage.page_label,
            locator_label=locator,
            modality=source.modality,
            mime_type=source.mime_type,
            text=chunk.text,
            score=passage.scores.fused,
            scores=ScoresObject.render(passage.scores),
            span=SpanObject(start=chunk.span.start, end=chunk.span.end),
            heading_path=list(chunk.heading_path),
            pages=list(chunk.page_numbers),
            sentences=[
                SentenceObject(
                    start=s.span.start,
                    end=s.span.end,
                    text=s.text,
                    score=s.score,
                    page_number=s.page_number,
                    page_label=s.page_label,
                )
                for s in passage.sentences
            ],
            source=SourceObject.render(source),
            access_url=access_url(source.id) if access_url else None,
            image_url=image_url,
            highlight_url=highlight_url,
        )


class SearchResults(WireModel):
    object: Literal["list"] = "list"
    search_query: str = Field(description="The query, as received.")
    data: list[SearchResult] = Field(description="Passages, best first.")
    has_more: Literal[False] = Field(default=False, description="Always false.")


def render_results(
    query: str, passages: Sequence[Passage], access_url: AccessUrl | None = None
) -> SearchResults:
    """The results of a search; ``access_url`` makes their links (None: they have none)."""
    return SearchResults(
        search_query=query, data=[SearchResult.render(p, access_url) for p in passages]
    )
