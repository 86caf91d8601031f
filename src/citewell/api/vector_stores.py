"""OpenAI's Vector Stores API over citewell's buckets, so the SDK's vector-store helpers work.

    POST   /v1/vector_stores                                  -> VectorStore (a new bucket)
    GET    /v1/vector_stores, /v1/vector_stores/{id}          -> VectorStore (every bucket is one)
    POST   /v1/vector_stores/{id}                             -> VectorStore (name, metadata)
    DELETE /v1/vector_stores/{id}                             -> the bucket, with its sources
    POST   /v1/vector_stores/{id}/files        {file_id}      -> VectorStoreFile (ingests the file)
    GET    /v1/vector_stores/{id}/files[/{file_id}]           -> VectorStoreFile
    GET    /v1/vector_stores/{id}/files/{file_id}/content     -> the source's canonical text
    DELETE /v1/vector_stores/{id}/files/{file_id}             -> the source
    POST   /v1/vector_stores/{id}/search                      -> vector_store.search_results.page

A vector store *is* a bucket: its id is the bucket's, its files are the bucket's current sources,
and its search is ``Library.search``. Attaching an uploaded file (``citewell.api.files``)
ingests the file's bytes as a source whose metadata holds the ``attributes`` and, under
``FILE_ID_KEY``, the file's id: that id names the source on these routes and in search results.
A source uploaded to the bucket directly is a vector-store file under its own id.

Attaching goes through ``Library.submit``, as an upload to the bucket does. A file that needs no
OCR is stored when the call returns (``completed``). One that needs OCR (a scan, an image) is
answered ``in_progress`` once OCR starts, and is the library's ingest job until it is stored
(``completed``) or fails (``failed``, with ``last_error``; nothing of it is stored). Jobs are
kept in the store, so a file in progress is finished by another server process (or this one,
restarted) when the one reading it dies. A file citewell cannot read at all is refused at once
with the error (415 ``unsupported_file``, 422 ``invalid_file``). What a bucket cannot hold, a
vector store's metadata, is kept by ``citewell.uploads``.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response
from pydantic import Field, StringConstraints, model_validator

from citewell.api.answering import Metadata, Name
from citewell.api.deps import Deleting, Ingesting, LibraryDep, Managing, PrincipalDep, Searching
from citewell.api.files import get_files
from citewell.api.links import access_urls
from citewell.api.search import BoundedFilter
from citewell.errors import Conflict, InvalidRequest, NotFound, PermissionDenied
from citewell.library import FILE_ID_KEY, Library
from citewell.model import (
    Bucket,
    IngestJob,
    IngestResult,
    MetadataValue,
    Passage,
    Permission,
    Principal,
    SearchRequest,
    Source,
)
from citewell.render.common import AccessUrl
from citewell.render.records import ListObject, WireModel, WireObject
from citewell.uploads import FileStore

__all__ = ["router"]

router = APIRouter(prefix="/v1/vector_stores", tags=["vector stores"])

POLL_AFTER_MS = "200"
"""``openai-poll-after-ms``: how long the SDK's pollers wait between reads of a file in progress."""
MAX_QUERY = 4000
"""The longest query searched, all parts of a list of queries together (``SearchRequest``)."""

AttributeKey = Annotated[str, StringConstraints(min_length=1, max_length=64)]
AttributeValue = Annotated[str, StringConstraints(max_length=512)] | bool | int | float
Attributes = Annotated[dict[AttributeKey, AttributeValue], Field(max_length=16)]
"""OpenAI's file ``attributes``: at most 16, values strings (≤ 512), numbers or booleans."""


class FileCounts(WireModel):
    in_progress: int = Field(description="Files being read with OCR.")
    completed: int = Field(description="Files searched: the bucket's current sources.")
    failed: int = Field(
        description="Files whose ingest failed, until removed (the server keeps them in memory)."
    )
    cancelled: Literal[0] = 0
    total: int


class VectorStoreObject(WireObject):
    """OpenAI's ``VectorStore``."""

    id: str = Field(description="The bucket's id, 'bkt_' followed by hex digits.")
    object: Literal["vector_store"] = "vector_store"
    created_at: int = Field(description="When the bucket was created, in Unix seconds.")
    name: str
    usage_bytes: int = Field(description="Bytes of the original files of its current sources.")
    file_counts: FileCounts
    status: Literal["in_progress", "completed"] = Field(
        description="'in_progress' while any of its files is, else 'completed'."
    )
    last_active_at: int | None = None
    metadata: dict[str, str]
    expires_after: None = Field(default=None, description="Vector stores do not expire.")
    expires_at: None = None


class VectorStoreCreate(WireModel):
    name: Name | None = Field(default=None, description="Defaults to the bucket's slug.")
    file_ids: list[Name] = Field(
        default_factory=list, max_length=500, description="Uploaded files to attach."
    )
    metadata: Metadata | None = None
    chunking_strategy: dict[str, Any] | None = Field(
        default=None, description="Accepted and ignored: citewell chunks by its own rules."
    )
    expires_after: None = Field(
        default=None, description="Vector stores do not expire: only null is accepted."
    )


class VectorStoreUpdate(WireModel):
    name: Name | None = Field(default=None, description="Null or absent: unchanged.")
    metadata: Metadata | None = Field(default=None, description="Replaces it; null clears it.")
    expires_after: None = Field(
        default=None, description="Vector stores do not expire: only null is accepted."
    )


class VectorStoreDeleted(WireModel):
    id: str
    object: Literal["vector_store.deleted"] = "vector_store.deleted"
    deleted: Literal[True] = True


class FileAttach(WireModel):
    file_id: Name = Field(description="An uploaded file (POST /v1/files).")
    attributes: Attributes | None = Field(
        default=None, description="Kept as the source's metadata: usable in filters."
    )
    chunking_strategy: dict[str, Any] | None = Field(
        default=None, description="Accepted and ignored: citewell chunks by its own rules."
    )


class FileError(WireModel):
    """OpenAI's ``last_error`` of a vector-store file."""

    code: Literal["server_error", "invalid_file"] = Field(
        description="'invalid_file': the file could not be read (a damaged page), or the vector "
        "store holds the same bytes under another file; 'server_error': the server failed."
    )
    message: str


class VectorStoreFileObject(WireObject):
    """OpenAI's ``VectorStoreFile``, with the source it becomes."""

    id: str = Field(description="The uploaded file's id; a directly uploaded source's own id.")
    object: Literal["vector_store.file"] = "vector_store.file"
    created_at: int = Field(
        description="When its source was stored, in Unix seconds; until then, when it was sent."
    )
    vector_store_id: str
    status: Literal["in_progress", "completed", "failed"] = Field(
        description="'in_progress' while it is read with OCR; 'failed': nothing of it is stored."
    )
    usage_bytes: int = Field(description="Size of the original file in bytes; 0 until stored.")
    last_error: FileError | None = Field(default=None, description="Why it failed; else null.")
    attributes: dict[str, MetadataValue]
    chunking_strategy: dict[str, str] = Field(default_factory=lambda: {"type": "other"})
    source_id: str = Field(
        description="The source version: GET /v1/sources/{source_id} (while in progress, the "
        "source it will be, with its OCR progress)."
    )
    filename: str


class VectorStoreFileDeleted(WireModel):
    id: str
    object: Literal["vector_store.file.deleted"] = "vector_store.file.deleted"
    deleted: Literal[True] = True


class TextContent(WireModel):
    type: Literal["text"] = "text"
    text: str


class FileContentPage(WireModel):
    object: Literal["vector_store.file_content.page"] = "vector_store.file_content.page"
    data: list[TextContent] = Field(description="The source's canonical text, in one part.")
    has_more: Literal[False] = False
    next_page: None = None


class RankingOptions(WireModel):
    ranker: Literal["none", "auto", "default-2024-11-15"] = "auto"
    score_threshold: float = Field(
        default=0.0, ge=0, le=1, description="Results scoring below it are left out."
    )


QueryText = Annotated[str, StringConstraints(min_length=1, max_length=MAX_QUERY)]


class VectorStoreSearch(WireModel):
    query: QueryText | Annotated[list[QueryText], Field(min_length=1, max_length=16)] = Field(
        description="A query, or several searched together as one."
    )
    max_num_results: int = Field(default=10, ge=1, le=50)
    filters: BoundedFilter | None = Field(
        default=None, description="Conditions on source attributes."
    )
    ranking_options: RankingOptions | None = None
    rewrite_query: bool = Field(default=False, description="Accepted; queries are not rewritten.")

    @model_validator(mode="after")
    def _short_enough(self) -> VectorStoreSearch:
        if len(self.joined_query()) > MAX_QUERY:
            raise ValueError(f"the queries together may hold at most {MAX_QUERY} characters")
        return self

    def queries(self) -> list[str]:
        return [self.query] if isinstance(self.query, str) else self.query

    def joined_query(self) -> str:
        return "\n".join(self.queries())


class SearchHit(WireModel):
    """OpenAI's ``VectorStoreSearchResponse``, with the passage's place in its source."""

    file_id: str = Field(description="The vector-store file: the uploaded file's id.")
    filename: str
    score: float = Field(description="Fused score in [0, 1].")
    attributes: dict[str, MetadataValue]
    content: list[TextContent] = Field(description="The passage, in one part.")
    source_id: str
    chunk_id: str
    page_number: int | None = Field(description="1-based page the passage starts on.")
    access_url: str = Field(description="A signed link to the original file (GET /v1/links/…).")

    @classmethod
    def render(cls, passage: Passage, access_url: AccessUrl) -> SearchHit:
        source = passage.source
        return cls(
            file_id=_file_id(source),
            filename=source.filename,
            score=passage.scores.fused,
            attributes=_attributes(source.metadata),
            content=[TextContent(text=passage.chunk.text)],
            source_id=source.id,
            chunk_id=passage.chunk.id,
            page_number=passage.page_number,
            access_url=access_url(source.id),
        )


class SearchPage(WireModel):
    object: Literal["vector_store.search_results.page"] = "vector_store.search_results.page"
    search_query: list[str] = Field(description="The queries, as received.")
    data: list[SearchHit] = Field(description="Passages, best first.")
    has_more: Literal[False] = False
    next_page: None = None


# vector stores -------------------------------------------------------------------------------
@router.post("")
def create_vector_store(
    body: VectorStoreCreate, request: Request, library: LibraryDep, principal: Managing
) -> VectorStoreObject:
    """A new bucket (slug ``vs-`` and hex digits), with the files given attached."""
    if body.file_ids and Permission.INGEST not in principal.permissions:
        raise PermissionDenied("This API key may not add files: it lacks the 'ingest' permission.")
    files = get_files(request)
    for file_id in body.file_ids:
        files.get(file_id, tenant_id=principal.tenant_id)  # an unknown one: nothing is made
    slug = f"vs-{secrets.token_hex(8)}"
    bucket = library.create_bucket(slug, name=body.name, principal=principal)
    try:
        if body.metadata:
            files.put_vector_store_metadata(bucket.id, body.metadata, tenant_id=principal.tenant_id)
        for file_id in body.file_ids:
            _attach(library, files, bucket, file_id, {}, principal)
    except BaseException:
        # A refused request changes nothing: not even half a vector store is left behind.
        _delete_store(library, files, bucket, principal)
        raise
    return _render_store(library, files, bucket, principal)


@router.get("")
def list_vector_stores(
    request: Request, library: LibraryDep, principal: PrincipalDep
) -> ListObject[VectorStoreObject]:
    """Every bucket, newest first, in one page."""
    files = get_files(request)
    buckets = sorted(
        library.list_buckets(principal=principal), key=lambda b: (b.created_at, b.id), reverse=True
    )
    return ListObject[VectorStoreObject].of(
        [_render_store(library, files, b, principal) for b in buckets]
    )


@router.get("/{vector_store_id}")
def get_vector_store(
    vector_store_id: str, request: Request, library: LibraryDep, principal: PrincipalDep
) -> VectorStoreObject:
    """A vector store by its id (or its bucket's slug)."""
    bucket = _bucket(library, vector_store_id, principal)
    return _render_store(library, get_files(request), bucket, principal)


@router.post("/{vector_store_id}")
def update_vector_store(
    vector_store_id: str,
    body: VectorStoreUpdate,
    request: Request,
    library: LibraryDep,
    principal: Managing,
) -> VectorStoreObject:
    """Rename it (its bucket) or replace its metadata."""
    files = get_files(request)
    bucket = _bucket(library, vector_store_id, principal)
    if body.name:
        bucket = library.rename_bucket(bucket.id, name=body.name, principal=principal)
    if "metadata" in body.model_fields_set:
        metadata = body.metadata or {}
        files.put_vector_store_metadata(bucket.id, metadata, tenant_id=principal.tenant_id)
    return _render_store(library, files, bucket, principal)


@router.delete("/{vector_store_id}")
def delete_vector_store(
    vector_store_id: str, request: Request, library: LibraryDep, principal: Deleting
) -> VectorStoreDeleted:
    """Delete the bucket with all its sources; the uploaded files stay."""
    bucket = _bucket(library, vector_store_id, principal)
    _delete_store(library, get_files(request), bucket, principal)
    return VectorStoreDeleted(id=bucket.id)


# vector-store files --------------------------------------------------------------------------
@router.post("/{vector_store_id}/files")
def create_vector_store_file(
    vector_store_id: str,
    body: FileAttach,
    request: Request,
    response: Response,
    library: LibraryDep,
    principal: Ingesting,
) -> VectorStoreFileObject:
    """Ingest an uploaded file into the bucket; attaching it again returns it as it stands.

    A file that needs OCR is answered ``in_progress`` once OCR starts (see the module docs)."""
    bucket = _bucket(library, vector_store_id, principal)
    attached = _attach(
        library, get_files(request), bucket, body.file_id, body.attributes, principal
    )
    response.headers["openai-poll-after-ms"] = POLL_AFTER_MS
    return _render(library, attached, principal)


@router.get("/{vector_store_id}/files")
def list_vector_store_files(
    vector_store_id: str,
    library: LibraryDep,
    principal: PrincipalDep,
    status: Annotated[
        Literal["in_progress", "completed", "failed", "cancelled"] | None,
        Query(alias="filter", description="Only files in this state (none is 'cancelled')."),
    ] = None,
) -> ListObject[VectorStoreFileObject]:
    """The bucket's current sources and the files not stored, newest first, in one page."""
    files = _files(library, _bucket(library, vector_store_id, principal), principal)
    return ListObject[VectorStoreFileObject].of([f for f in files if status in (None, f.status)])


@router.get("/{vector_store_id}/files/{file_id}")
def get_vector_store_file(
    vector_store_id: str,
    file_id: str,
    response: Response,
    library: LibraryDep,
    principal: PrincipalDep,
) -> VectorStoreFileObject:
    """What the SDK's ``poll`` helpers read until the status is no longer ``in_progress``."""
    bucket = _bucket(library, vector_store_id, principal)
    response.headers["openai-poll-after-ms"] = POLL_AFTER_MS
    return _render(library, _find(library, bucket, file_id, principal), principal)


@router.get("/{vector_store_id}/files/{file_id}/content")
def get_vector_store_file_content(
    vector_store_id: str, file_id: str, library: LibraryDep, principal: Searching
) -> FileContentPage:
    """The canonical text every offset citewell reports indexes; 409 until it is stored."""
    bucket = _bucket(library, vector_store_id, principal)
    found = _find(library, bucket, file_id, principal)
    if isinstance(found, IngestJob):
        status = _render(library, found, principal).status
        raise Conflict(
            f"File '{file_id}' in vector store '{bucket.id}' is {status}: it has no content.",
            param="file_id",
        )
    text = library.source_text(found.id, principal=principal)
    return FileContentPage(data=[TextContent(text=text)])


@router.delete("/{vector_store_id}/files/{file_id}")
def delete_vector_store_file(
    vector_store_id: str, file_id: str, library: LibraryDep, principal: Deleting
) -> VectorStoreFileDeleted:
    """Delete the source, cancel a file in progress (OCR stops at its next page), or forget a
    failed file; the uploaded file stays."""
    bucket = _bucket(library, vector_store_id, principal)
    found = _find(library, bucket, file_id, principal)
    if isinstance(found, Source):
        library.delete_source(found.id, principal=principal)
    else:
        library.forget_job(found.source_id, principal=principal)
    return VectorStoreFileDeleted(id=file_id)


# search --------------------------------------------------------------------------------------
@router.post("/{vector_store_id}/search")
def search_vector_store(
    vector_store_id: str,
    body: VectorStoreSearch,
    request: Request,
    library: LibraryDep,
    principal: Searching,
) -> SearchPage:
    """``Library.search`` in the bucket; a list of queries is searched as one, joined."""
    bucket = _bucket(library, vector_store_id, principal)
    searched = SearchRequest(
        query=body.joined_query(),
        bucket_ids=(bucket.id,),
        filters=body.filters,
        max_results=body.max_num_results,
    )
    threshold = body.ranking_options.score_threshold if body.ranking_options else 0.0
    passages = library.search(searched, principal=principal)
    links = access_urls(request, principal, Permission.SEARCH)
    return SearchPage(
        search_query=body.queries(),
        data=[SearchHit.render(p, links) for p in passages if p.scores.fused >= threshold],
    )


# helpers -------------------------------------------------------------------------------------
def _file_id(item: Source | IngestJob) -> str:
    """The id a source (or the source a job stores) has as a vector-store file: the uploaded
    file's, else its own."""
    own = item.id if isinstance(item, Source) else item.source_id
    return str(item.metadata.get(FILE_ID_KEY, own))


def _bucket(library: Library, vector_store_id: str, principal: Principal) -> Bucket:
    try:
        return library.get_bucket(vector_store_id, principal=principal)
    except NotFound:
        raise NotFound(
            f"No vector store found with id '{vector_store_id[:100]}'.", param="vector_store_id"
        ) from None


def _unstored(library: Library, bucket: Bucket, principal: Principal) -> dict[str, IngestJob]:
    """The newest background ingest of each file, by file id, unless it stored the file: then
    the store tells whether the file is there still."""
    newest = {_file_id(job): job for job in library.ingest_jobs(bucket.id, principal=principal)}
    return {file_id: job for file_id, job in newest.items() if not _stored(job)}


def _stored(job: IngestJob) -> bool:
    """Whether ``job`` ended storing its file as its own source."""
    return job.result_id == job.source_id


def _find(
    library: Library, bucket: Bucket, file_id: str, principal: Principal
) -> Source | IngestJob:
    """The source a vector-store file id names (an older version of a file included), else the
    newest background ingest of the file, running or failed."""
    # The jobs before the sources: a job that stores the file in between is then a source.
    unstored = _unstored(library, bucket, principal).get(file_id)
    for source in library.list_sources(bucket.id, include_superseded=True, principal=principal):
        if _file_id(source) == file_id:
            return source
    if unstored is not None:
        return unstored
    raise NotFound(
        f"No file found with id '{file_id[:100]}' in vector store '{bucket.id}'.", param="file_id"
    )


def _files(library: Library, bucket: Bucket, principal: Principal) -> list[VectorStoreFileObject]:
    """The vector store's files, newest first: its current sources, and the files in progress
    or failed."""
    unstored = _unstored(library, bucket, principal)  # first, as in ``_find``
    sources = library.list_sources(bucket.id, principal=principal)
    stored = {_file_id(s) for s in sources}
    files = [_render_file(s) for s in sources] + [
        _render_job(library, job, principal)
        for file_id, job in unstored.items()
        if file_id not in stored
    ]
    return sorted(files, key=lambda f: (f.created_at, f.id), reverse=True)


def _attach(
    library: Library,
    files: FileStore,
    bucket: Bucket,
    file_id: str,
    attributes: dict[str, MetadataValue] | None,
    principal: Principal,
) -> Source | IngestJob:
    """The source the file is stored as, or the job reading it with OCR."""
    if attributes and FILE_ID_KEY in attributes:
        raise InvalidRequest(
            f"The attribute '{FILE_ID_KEY}' is citewell's: it names the uploaded file.",
            param=f"attributes.{FILE_ID_KEY}",
        )
    stored = files.get(file_id, tenant_id=principal.tenant_id)
    submitted = library.submit(
        files.content(file_id, tenant_id=principal.tenant_id),
        filename=stored.filename,
        bucket=bucket.id,
        metadata={**(attributes or {}), FILE_ID_KEY: file_id},
        principal=principal,
    )
    attached = submitted.source if isinstance(submitted, IngestResult) else submitted
    held = _file_id(attached)
    if held != file_id:
        # One source per content in a bucket: the file would be the same passages twice.
        raise Conflict(_held_already(bucket.id, held), param="file_id")
    return attached


def _held_already(bucket_id: str, held: str) -> str:
    return f"Vector store '{bucket_id}' already holds the same bytes as '{held}'."


def _delete_store(library: Library, files: FileStore, bucket: Bucket, principal: Principal) -> None:
    library.delete_bucket(bucket.id, principal=principal)
    files.delete_vector_store_metadata(bucket.id, tenant_id=principal.tenant_id)


def _attributes(metadata: Mapping[str, MetadataValue]) -> dict[str, MetadataValue]:
    return {k: v for k, v in metadata.items() if k != FILE_ID_KEY}


def _render_store(
    library: Library, files: FileStore, bucket: Bucket, principal: Principal
) -> VectorStoreObject:
    listed = _files(library, bucket, principal)
    counts = Counter(f.status for f in listed)
    return VectorStoreObject(
        id=bucket.id,
        created_at=int(bucket.created_at.timestamp()),
        name=bucket.name,
        usage_bytes=sum(f.usage_bytes for f in listed),
        file_counts=FileCounts(
            in_progress=counts["in_progress"],
            completed=counts["completed"],
            failed=counts["failed"],
            total=len(listed),
        ),
        status="in_progress" if counts["in_progress"] else "completed",
        metadata=files.vector_store_metadata(bucket.id, tenant_id=principal.tenant_id),
    )


def _render(
    library: Library, found: Source | IngestJob, principal: Principal
) -> VectorStoreFileObject:
    if isinstance(found, Source):
        return _render_file(found)
    return _render_job(library, found, principal)


def _render_file(source: Source) -> VectorStoreFileObject:
    return VectorStoreFileObject(
        id=_file_id(source),
        created_at=int(source.created_at.timestamp()),
        vector_store_id=source.bucket_id,
        status="completed",
        usage_bytes=source.byte_size,
        attributes=_attributes(source.metadata),
        source_id=source.id,
        filename=source.filename,
    )


def _render_job(library: Library, job: IngestJob, principal: Principal) -> VectorStoreFileObject:
    """A file ingested in the background, as it stands now."""
    if job.active:
        return _job_file(job, None)
    if job.result_id is None:
        reason = FileError(
            code="invalid_file" if job.unreadable else "server_error", message=str(job.error)
        )
        return _job_file(job, reason)
    # It found the bytes stored under another source meanwhile.
    try:
        source = library.get_source(job.result_id, principal=principal)
    except NotFound:  # deleted since: the source's id is all there is to name it by
        held = job.result_id
    else:
        held = _file_id(source)
        if held == _file_id(job):
            return _render_file(source)
    # Under another file (``_attach`` refuses that).
    return _job_file(
        job, FileError(code="invalid_file", message=_held_already(job.bucket_id, held))
    )


def _job_file(job: IngestJob, error: FileError | None) -> VectorStoreFileObject:
    """A file not stored: in progress, or failed with ``error``."""
    return VectorStoreFileObject(
        id=_file_id(job),
        created_at=int(job.created_at.timestamp()),
        vector_store_id=job.bucket_id,
        status="in_progress" if error is None else "failed",
        usage_bytes=0,
        last_error=error,
        attributes=_attributes(job.metadata),
        source_id=job.source_id,
        filename=job.filename,
    )
