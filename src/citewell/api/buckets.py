"""Buckets over HTTP: ``/v1/buckets``. Each handler mirrors the ``Library`` method of its name."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import IO, Annotated, Literal

from fastapi import APIRouter, File, Form, Response, UploadFile, status
from fastapi.responses import StreamingResponse
from pydantic import Field

from citewell.api.deps import Deleting, Exporting, LibraryDep, Managing, PrincipalDep
from citewell.errors import NotFound
from citewell.render.records import BucketObject, ListObject, WireModel

__all__ = ["BucketObject", "router"]

router = APIRouter(prefix="/v1/buckets", tags=["buckets"])

_SEND_CHUNK = 1024 * 1024


class BucketCreate(WireModel):
    slug: str = Field(
        description="1-63 lowercase letters, digits, '-' or '_', starting with a letter or digit."
    )
    name: str | None = Field(default=None, max_length=200, description="Defaults to the slug.")


class BucketUpdate(WireModel):
    slug: str | None = Field(
        default=None, description="New slug, unique among the tenant's buckets. [default: kept]"
    )
    name: str | None = Field(
        default=None, min_length=1, max_length=200, description="New name. [default: kept]"
    )


class BucketDeleted(WireModel):
    id: str
    object: Literal["bucket.deleted"] = "bucket.deleted"
    deleted: Literal[True] = True


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    responses={200: {"model": BucketObject, "description": "The bucket already existed."}},
)
def create_bucket(
    body: BucketCreate, response: Response, library: LibraryDep, principal: Managing
) -> BucketObject:
    """Create a bucket; creating one that exists returns it unchanged with status 200."""
    try:
        existing = library.get_bucket(body.slug, principal=principal)
    except NotFound:
        existing = None
    if existing is not None and existing.slug == body.slug:
        response.status_code = status.HTTP_200_OK
        return BucketObject.render(existing)
    return BucketObject.render(
        library.create_bucket(body.slug, name=body.name, principal=principal)
    )


@router.get("")
def list_buckets(library: LibraryDep, principal: PrincipalDep) -> ListObject[BucketObject]:
    buckets = library.list_buckets(principal=principal)
    return ListObject[BucketObject].of([BucketObject.render(b) for b in buckets])


@router.get("/{bucket}")
def get_bucket(bucket: str, library: LibraryDep, principal: PrincipalDep) -> BucketObject:
    """A bucket by id or slug."""
    return BucketObject.render(library.get_bucket(bucket, principal=principal))


@router.delete("/{bucket}")
def delete_bucket(bucket: str, library: LibraryDep, principal: Deleting) -> BucketDeleted:
    """Delete a bucket with all its sources."""
    bucket_id = library.get_bucket(bucket, principal=principal).id
    library.delete_bucket(bucket_id, principal=principal)
    return BucketDeleted(id=bucket_id)


# Before the routes of "/{bucket}": "import" is this route's, not a bucket's slug.
@router.post("/import", status_code=status.HTTP_201_CREATED)
def import_bucket(
    file: Annotated[UploadFile, File(description="A bucket archive, as exported.")],
    library: LibraryDep,
    principal: Managing,
    slug: Annotated[
        str | None, Form(description="Slug of the new bucket. [default: the archive's]")
    ] = None,
) -> BucketObject:
    """Create a bucket from an exported archive; 409 when the slug is taken."""
    bucket = library.import_bucket(
        file.file, slug=slug, name=file.filename or "the archive", principal=principal
    )
    return BucketObject.render(bucket)


@router.post("/{bucket}")
def rename_bucket(
    bucket: str, body: BucketUpdate, library: LibraryDep, principal: Managing
) -> BucketObject:
    """Change a bucket's slug and/or name; 409 when another bucket has the slug."""
    return BucketObject.render(
        library.rename_bucket(bucket, slug=body.slug, name=body.name, principal=principal)
    )


@router.get(
    "/{bucket}/export",
    response_class=StreamingResponse,
    responses={200: {"description": "The bucket archive.", "content": {"application/zip": {}}}},
)
def export_bucket(bucket: str, library: LibraryDep, principal: Exporting) -> StreamingResponse:
    """The bucket as a zip of its originals and a manifest, which ``import_bucket`` reads."""
    found = library.get_bucket(bucket, principal=principal)
    # On disk, not in memory: a bucket's originals may be far larger than the server's memory.
    # Closed (and so removed) by _send once sent. The data folder is made here if need be: with
    # PostgreSQL and an S3 bucket, nothing else may have written there.
    library.settings.data_dir.mkdir(parents=True, exist_ok=True)
    spool = tempfile.TemporaryFile(dir=library.settings.data_dir)
    try:
        library.export_bucket(found.id, spool, principal=principal)
        size = spool.tell()
        spool.seek(0)
    except BaseException:
        spool.close()
        raise
    return StreamingResponse(
        _send(spool),
        media_type="application/zip",
        headers={
            "Content-Disposition": f'attachment; filename="{found.slug}.citewell.zip"',
            "Content-Length": str(size),
        },
    )


def _send(spool: IO[bytes]) -> Iterator[bytes]:
    with spool:
        while chunk := spool.read(_SEND_CHUNK):
            yield chunk
