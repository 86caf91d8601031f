"""The Files API in two dialects on the same paths: OpenAI's, and Anthropic's when the request
carries an ``anthropic-version`` header (``citewell.api.errors.is_anthropic``).

    POST   /v1/files              multipart ``file`` (+ ``purpose``)  -> FileObject | FileMetadata
    GET    /v1/files                                  -> a list of them, in one page
    GET    /v1/files/{file_id}                        -> FileObject | FileMetadata
    GET    /v1/files/{file_id}/content                -> the bytes (OpenAI's dialect only)
    DELETE /v1/files/{file_id}                        -> the dialect's deletion object

There is one file store (``citewell.uploads``): a file uploaded in one dialect is the same
file in the other. Anthropic's requests name files in ``document`` blocks; OpenAI's attach them
to vector stores (``citewell.api.vector_stores``), which ingests their bytes as sources. Deleting
a file deletes those sources too, as OpenAI's API does: delete means gone.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

import anyio.to_thread
from fastapi import APIRouter, File, Form, Query, Request, Response, UploadFile
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from citewell.api.deps import Deleting, Ingesting, LibraryDep, PrincipalDep, Searching, get_library
from citewell.api.errors import is_anthropic, request_id
from citewell.api.sources import read_upload
from citewell.errors import InvalidRequest, UnsupportedFormat
from citewell.ingest import detect_media_type
from citewell.library import Library
from citewell.model import Principal
from citewell.render.records import ListObject, WireObject
from citewell.uploads import DEFAULT_PURPOSE, FileStore, StoredFile

__all__ = ["FileMetadata", "FileObject", "get_files", "router"]

router = APIRouter(tags=["files"])

PURPOSES = ("assistants", DEFAULT_PURPOSE)
"""OpenAI purposes citewell keeps files for: to search (``assistants``) or to read."""


def get_files(request: Request) -> FileStore:
    return get_library(request).files


class FileMetadata(BaseModel):
    """Anthropic's ``FileMetadata``."""

    id: str = Field(description="'file_' followed by 24 letters and digits.")
    type: Literal["file"] = "file"
    filename: str
    mime_type: str
    size_bytes: int
    created_at: dt.datetime = Field(description="RFC 3339, UTC.")
    downloadable: bool = Field(default=False, description="Uploaded files are not downloadable.")

    @classmethod
    def render(cls, stored: StoredFile) -> FileMetadata:
        return cls(
            id=stored.id,
            filename=stored.filename,
            mime_type=stored.mime_type,
            size_bytes=stored.size_bytes,
            created_at=stored.created_at,
        )


class FileList(BaseModel):
    """One page holding every file: read by both the cursor and the id-paged SDK helpers."""

    data: list[FileMetadata]
    has_more: Literal[False] = False
    first_id: str | None
    last_id: str | None
    next_page: None = None


class FileDeleted(BaseModel):
    id: str
    type: Literal["file_deleted"] = "file_deleted"


class FileObject(WireObject):
    """OpenAI's ``FileObject``."""

    id: str = Field(description="'file_' followed by 24 letters and digits.")
    object: Literal["file"] = "file"
    bytes: int = Field(description="Size of the file in bytes.")
    created_at: int = Field(description="When the file was uploaded, in Unix seconds.")
    filename: str
    purpose: str = Field(description="'assistants' or 'user_data'.")
    status: Literal["processed"] = Field(
        default="processed", description="Always 'processed': a file is kept as it is sent."
    )
    expires_at: None = Field(default=None, description="Files do not expire.")
    status_details: None = None

    @classmethod
    def render(cls, stored: StoredFile) -> FileObject:
        return cls(
            id=stored.id,
            bytes=stored.size_bytes,
            created_at=int(stored.created_at.timestamp()),
            filename=stored.filename,
            purpose=stored.purpose,
        )


class OpenAIFileDeleted(BaseModel):
    """OpenAI's ``FileDeleted``."""

    id: str
    object: Literal["file"] = "file"
    deleted: Literal[True] = True


def _answer(request: Request, model: BaseModel) -> JSONResponse:
    return JSONResponse(
        model.model_dump(mode="json"), headers={"request-id": request_id(request.scope)}
    )


@router.post("/v1/files", response_model=FileObject, responses={200: {"model": FileMetadata}})
async def upload_file(
    request: Request,
    file: Annotated[UploadFile, File(description="The file.")],
    principal: Ingesting,
    purpose: Annotated[
        str | None, Form(description="OpenAI's: 'assistants' or 'user_data'; required there.")
    ] = None,
) -> JSONResponse:
    """Keep a file: for Anthropic's ``document`` blocks, or to attach to vector stores."""
    anthropic = is_anthropic(request.scope)
    purpose = DEFAULT_PURPOSE if anthropic else _purpose(purpose)
    files = get_files(request)
    limit = request.app.state.library.settings.ingest.max_file_bytes
    data = await anyio.to_thread.run_sync(read_upload, file, limit)
    filename = (file.filename or "file").replace("\\", "/").rsplit("/", 1)[-1] or "file"
    mime_type = _media_type(data, filename, file.content_type)
    stored = await anyio.to_thread.run_sync(
        lambda: files.put(
            data,
            filename=filename,
            mime_type=mime_type,
            tenant_id=principal.tenant_id,
            purpose=purpose,
        )
    )
    return _answer(request, FileMetadata.render(stored) if anthropic else FileObject.render(stored))


@router.get(
    "/v1/files", response_model=ListObject[FileObject], responses={200: {"model": FileList}}
)
async def list_files(
    request: Request,
    principal: PrincipalDep,
    purpose: Annotated[str | None, Query(description="Only files of this purpose.")] = None,
) -> JSONResponse:
    """Every file of the caller, newest first, in one page."""
    stored = await anyio.to_thread.run_sync(
        lambda: get_files(request).list(tenant_id=principal.tenant_id)
    )
    if not is_anthropic(request.scope):
        kept = [FileObject.render(s) for s in stored if purpose in (None, s.purpose)]
        return _answer(request, ListObject[FileObject].of(kept))
    data = [FileMetadata.render(s) for s in stored]
    page = FileList(
        data=data,
        first_id=data[0].id if data else None,
        last_id=data[-1].id if data else None,
    )
    return _answer(request, page)


@router.get(
    "/v1/files/{file_id}", response_model=FileObject, responses={200: {"model": FileMetadata}}
)
async def get_file(file_id: str, request: Request, principal: PrincipalDep) -> JSONResponse:
    stored = await anyio.to_thread.run_sync(
        lambda: get_files(request).get(file_id, tenant_id=principal.tenant_id)
    )
    if is_anthropic(request.scope):
        return _answer(request, FileMetadata.render(stored))
    return _answer(request, FileObject.render(stored))


@router.get(
    "/v1/files/{file_id}/content",
    response_class=Response,
    responses={200: {"description": "The file's bytes.", "content": {"*/*": {}}}},
)
async def get_file_content(file_id: str, request: Request, principal: Searching) -> Response:
    """The bytes of a file, as OpenAI's ``files.content`` reads them."""
    files = get_files(request)
    stored = await anyio.to_thread.run_sync(
        lambda: files.get(file_id, tenant_id=principal.tenant_id)
    )
    if is_anthropic(request.scope):
        # Anthropic lets clients download only the files its tools wrote, never uploads.
        raise InvalidRequest(f"File {file_id} is not downloadable.", param="file_id")
    data = await anyio.to_thread.run_sync(
        lambda: files.content(file_id, tenant_id=principal.tenant_id)
    )
    return Response(
        content=data,
        media_type=stored.mime_type,
        headers={
            "Content-Disposition": "attachment",
            # An uploaded HTML page must never run as part of this origin.
            "Content-Security-Policy": "sandbox",
            "X-Content-Type-Options": "nosniff",
            "request-id": request_id(request.scope),
        },
    )


@router.delete(
    "/v1/files/{file_id}", response_model=OpenAIFileDeleted, responses={200: {"model": FileDeleted}}
)
async def delete_file(
    file_id: str, request: Request, library: LibraryDep, principal: Deleting
) -> JSONResponse:
    """Delete a file, and the sources ingested from it in every vector store."""
    files = get_files(request)
    await anyio.to_thread.run_sync(lambda: _delete(files, library, file_id, principal))
    if is_anthropic(request.scope):
        return _answer(request, FileDeleted(id=file_id))
    return _answer(request, OpenAIFileDeleted(id=file_id))


def _delete(files: FileStore, library: Library, file_id: str, principal: Principal) -> None:
    files.get(file_id, tenant_id=principal.tenant_id)
    for job in library.jobs_of_file(file_id, principal=principal):
        library.forget_job(job.source_id, principal=principal)  # one being read is cancelled
    for source in library.sources_from_file(file_id, principal=principal):
        library.delete_source(source.id, principal=principal)
    # Last: until the file itself is gone, a failed deletion can be retried.
    files.delete(file_id, tenant_id=principal.tenant_id)


def _purpose(purpose: str | None) -> str:
    if purpose is None:
        raise InvalidRequest("Missing required parameter: 'purpose'.", param="purpose")
    if purpose not in PURPOSES:
        raise InvalidRequest(
            f"Invalid 'purpose': citewell keeps files only for {' or '.join(PURPOSES)},"
            f" not {purpose[:100]!r}.",
            param="purpose",
        )
    return purpose


def _media_type(data: bytes, filename: str, declared: str | None) -> str:
    """PDFs and text are told by their bytes; otherwise the part's type, if it names one."""
    try:
        detected = detect_media_type(data, filename)
    except UnsupportedFormat:
        detected = None
    if detected in ("application/pdf", "text/plain") or declared in (
        None,
        "",
        "application/octet-stream",
    ):
        return detected or "application/octet-stream"
    return declared.split(";", 1)[0].strip().lower()
