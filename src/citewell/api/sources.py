"""Sources over HTTP: upload into a bucket, list, read back, delete.

An upload is refused with 413 before it is buffered when its declared size is over the limit
(the body-limit middleware in ``app.py``), and while it is read here when it turns out larger.
The media type is detected from the bytes and the file name; the part's Content-Type is ignored,
because clients often send ``application/octet-stream`` for everything.

A file that needs OCR (an image, a PDF with scanned pages) is answered with 202 as soon as OCR
starts: its source is ``processing``, with the pages read so far, and becomes ``ready`` (or
``failed``) later; ``GET /v1/sources/{id}`` tells which (``Library.submit``). The handlers are
plain functions, which FastAPI runs in its thread pool: a long upload never holds up the event
loop, so other requests are served meanwhile.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, File, Form, Query, Response, UploadFile, status
from pydantic import Field

from citewell.api.deps import Deleting, Ingesting, LibraryDep, PrincipalDep, Searching
from citewell.errors import FileTooLarge, InvalidRequest, NotFound
from citewell.library import Library
from citewell.model import (
    IngestJob,
    IngestOutcome,
    MetadataValue,
    Principal,
)
from citewell.render.records import (
    IngestResponse,
    ListObject,
    PageObject,
    SourceObject,
    WireModel,
)

__all__ = ["IngestResponse", "SourceObject", "original_response", "read_upload", "router"]

router = APIRouter(tags=["sources"])

_READ_CHUNK = 1024 * 1024


class SourceDeleted(WireModel):
    id: str
    object: Literal["source.deleted"] = "source.deleted"
    deleted: Literal[True] = True


class SourceText(WireModel):
    object: Literal["source.text"] = "source.text"
    source_id: str
    text: str = Field(description="The canonical text; every offset citewell reports indexes it.")
    pages: list[PageObject] = Field(description="Pages in order; empty for sources without pages.")


@router.post(
    "/v1/buckets/{bucket}/sources",
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {"model": IngestResponse, "description": "The bucket already held these bytes."},
        202: {"model": IngestResponse, "description": "Accepted: being read with OCR."},
    },
)
def upload_source(
    bucket: str,
    file: Annotated[UploadFile, File(description="The original file.")],
    response: Response,
    library: LibraryDep,
    principal: Ingesting,
    effective_date: Annotated[
        dt.date | None, Form(description="Date from which the content applies, YYYY-MM-DD.")
    ] = None,
    acl: Annotated[str | None, Form(description='JSON array of labels, e.g. ["hr"].')] = None,
    metadata: Annotated[
        str | None, Form(description="JSON object of strings, numbers or booleans.")
    ] = None,
) -> IngestResponse:
    """Ingest one file: a new source, a new version of one, or nothing for bytes already held.

    A file that needs OCR is answered with 202 once OCR starts (see the module docs)."""
    limit = library.settings.ingest.max_file_bytes
    data = read_upload(file, limit)
    result = library.submit(
        data,
        filename=file.filename or "",
        bucket=bucket,
        effective_date=effective_date,
        acl=_labels(acl),
        metadata=_attributes(metadata),
        principal=principal,
    )
    if isinstance(result, IngestJob):
        response.status_code = status.HTTP_202_ACCEPTED
        return IngestResponse.render_job(result)
    if result.outcome is IngestOutcome.UNCHANGED:
        response.status_code = status.HTTP_200_OK
    return IngestResponse.render(result)


@router.get("/v1/buckets/{bucket}/sources")
def list_sources(
    bucket: str,
    library: LibraryDep,
    principal: PrincipalDep,
    include_superseded: Annotated[
        bool, Query(description="Whether older versions of files are listed too.")
    ] = False,
) -> ListObject[SourceObject]:
    sources = library.list_sources(
        bucket, include_superseded=include_superseded, principal=principal
    )
    return ListObject[SourceObject].of([SourceObject.render(s) for s in sources])


@router.get("/v1/sources/{source_id}")
def get_source(source_id: str, library: LibraryDep, principal: PrincipalDep) -> SourceObject:
    """A source; one being read with OCR (``processing``) or whose ingest failed, too."""
    try:
        return SourceObject.render(library.get_source(source_id, principal=principal))
    except NotFound:
        job = library.ingest_job(source_id, principal=principal)
        if job.result_id is None:
            return SourceObject.render_job(job)
        # Stored since (unless deleted again), or held by the bucket already when the job came
        # to store it.
        return SourceObject.render(library.get_source(job.result_id, principal=principal))


@router.delete("/v1/sources/{source_id}")
def delete_source(source_id: str, library: LibraryDep, principal: Deleting) -> SourceDeleted:
    """Delete one version; a newer or older version of the same file is left as it is."""
    library.delete_source(source_id, principal=principal)
    return SourceDeleted(id=source_id)


@router.get(
    "/v1/sources/{source_id}/content",
    response_class=Response,
    responses={200: {"description": "The original bytes.", "content": {"*/*": {}}}},
)
def get_source_content(source_id: str, library: LibraryDep, principal: Searching) -> Response:
    """The original file, as a download."""
    return original_response(library, source_id, principal, disposition="attachment")


@router.get("/v1/sources/{source_id}/text")
def get_source_text(source_id: str, library: LibraryDep, principal: Searching) -> SourceText:
    """The canonical text every span indexes, with the range of each page."""
    return SourceText(
        source_id=source_id,
        text=library.source_text(source_id, principal=principal),
        pages=[PageObject.render(p) for p in library.source_pages(source_id, principal=principal)],
    )


def read_upload(file: UploadFile, limit: int) -> bytes:
    """The uploaded bytes, read in chunks so that an oversized file stops at the limit."""
    parts: list[bytes] = []
    size = 0
    while chunk := file.file.read(_READ_CHUNK):
        size += len(chunk)
        if size > limit:
            raise FileTooLarge(
                f"The file is larger than the limit of {limit} bytes.", filename=file.filename
            )
        parts.append(chunk)
    return b"".join(parts)


def _labels(acl: str | None) -> frozenset[str]:
    value = _json_field(acl, "acl")
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidRequest("acl must be a JSON array of non-empty strings.", param="acl")
    return frozenset(value)


def _attributes(metadata: str | None) -> dict[str, MetadataValue]:
    value = _json_field(metadata, "metadata")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidRequest("metadata must be a JSON object.", param="metadata")
    # Keys and values are checked by Library.ingest, the same for every caller.
    return value


def _json_field(raw: str | None, param: str) -> Any:
    if raw is None or not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        raise InvalidRequest(f"{param} is not valid JSON.", param=param) from None


def original_response(
    library: Library,
    source_id: str,
    principal: Principal,
    *,
    disposition: Literal["attachment", "inline"],
    headers: Mapping[str, str] | None = None,
) -> Response:
    """A source's original bytes with its media type, named after its file: a download
    (``attachment``) or for the browser to show (``inline``); ``headers`` are added."""
    source = library.get_source(source_id, principal=principal)
    return Response(
        content=library.original(source.id, principal=principal),
        media_type=source.mime_type,
        headers={
            "Content-Disposition": _disposition(disposition, source.filename),
            "Content-Security-Policy": _content_policy(source.mime_type),
            "X-Content-Type-Options": "nosniff",
            **(headers or {}),
        },
    )


def _content_policy(media_type: str) -> str:
    """An uploaded HTML page (or SVG image) must never run as part of this origin: sandboxed.
    Chromium refuses to show a PDF in a sandboxed document, and its PDF viewer runs apart from
    the page's origin: a PDF is only kept from being framed by other sites."""
    return "frame-ancestors 'self'" if media_type == "application/pdf" else "sandbox"


def _disposition(kind: str, filename: str) -> str:
    """A Content-Disposition naming the file; non-ASCII names use RFC 5987 encoding."""
    quoted = quote(filename, safe="")
    if quoted == filename:
        return f'{kind}; filename="{filename}"'
    fallback = "".join(
        c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in filename
    )
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{quoted}"
