"""Anthropic's Files API: upload a file once, then name it in ``document`` blocks by ``file_id``.

    POST   /v1/files              multipart ``file``  -> FileMetadata
    GET    /v1/files                                  -> {data, has_more, first_id, last_id}
    GET    /v1/files/{file_id}                        -> FileMetadata
    DELETE /v1/files/{file_id}                        -> {"id", "type": "file_deleted"}

Files are kept per tenant in ``citewell.store.files`` (not as sources: nothing retrieves from
them). OpenAI's Files API will live on the same paths; a request tells which one it means by
its ``anthropic-version`` header (``citewell.api.errors.is_anthropic``). Until OpenAI's exists,
every request gets Anthropic's shapes, and errors take Anthropic's shape when the header is
present.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

import anyio.to_thread
from fastapi import APIRouter, File, Request, UploadFile
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from citewell.api.deps import PrincipalDep
from citewell.api.errors import request_id
from citewell.api.sources import read_upload
from citewell.errors import StoreError, UnsupportedFormat
from citewell.ingest import detect_media_type
from citewell.store.files import FileStore, StoredFile

__all__ = ["FileMetadata", "router"]

router = APIRouter(tags=["files"])


def get_files(request: Request) -> FileStore:
    files: FileStore | None = getattr(request.app.state, "files", None)
    if files is None:
        raise StoreError("The file store is not open yet.")
    return files


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


def _answer(request: Request, model: BaseModel) -> JSONResponse:
    return JSONResponse(
        model.model_dump(mode="json"), headers={"request-id": request_id(request.scope)}
    )


@router.post("/v1/files", response_model=FileMetadata)
async def upload_file(
    request: Request,
    file: Annotated[UploadFile, File(description="The file.")],
    principal: PrincipalDep,
) -> JSONResponse:
    """Keep a file to name later in ``document`` blocks (``{"type": "file", "file_id": …}``)."""
    files = get_files(request)
    limit = request.app.state.library.settings.ingest.max_file_bytes
    data = await anyio.to_thread.run_sync(read_upload, file, limit)
    filename = (file.filename or "file").replace("\\", "/").rsplit("/", 1)[-1] or "file"
    mime_type = _media_type(data, filename, file.content_type)
    stored = await anyio.to_thread.run_sync(
        lambda: files.put(
            data, filename=filename, mime_type=mime_type, tenant_id=principal.tenant_id
        )
    )
    return _answer(request, FileMetadata.render(stored))


@router.get("/v1/files", response_model=FileList)
async def list_files(request: Request, principal: PrincipalDep) -> JSONResponse:
    """Every file of the caller, newest first, in one page."""
    stored = await anyio.to_thread.run_sync(
        lambda: get_files(request).list(tenant_id=principal.tenant_id)
    )
    data = [FileMetadata.render(s) for s in stored]
    page = FileList(
        data=data,
        first_id=data[0].id if data else None,
        last_id=data[-1].id if data else None,
    )
    return _answer(request, page)


@router.get("/v1/files/{file_id}", response_model=FileMetadata)
async def get_file(file_id: str, request: Request, principal: PrincipalDep) -> JSONResponse:
    stored = await anyio.to_thread.run_sync(
        lambda: get_files(request).get(file_id, tenant_id=principal.tenant_id)
    )
    return _answer(request, FileMetadata.render(stored))


@router.delete("/v1/files/{file_id}", response_model=FileDeleted)
async def delete_file(file_id: str, request: Request, principal: PrincipalDep) -> JSONResponse:
    await anyio.to_thread.run_sync(
        lambda: get_files(request).delete(file_id, tenant_id=principal.tenant_id)
    )
    return _answer(request, FileDeleted(id=file_id))


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
