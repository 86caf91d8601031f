"""Buckets over HTTP: ``/v1/buckets``. Each handler mirrors the ``Library`` method of its name."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Response, status
from pydantic import Field

from citewell.api.deps import LibraryDep, ListObject, PrincipalDep, WireModel, WireObject
from citewell.errors import NotFound
from citewell.model import Bucket

__all__ = ["BucketObject", "router"]

router = APIRouter(prefix="/v1/buckets", tags=["buckets"])


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


class BucketCreate(WireModel):
    slug: str = Field(
        description="1-63 lowercase letters, digits, '-' or '_', starting with a letter or digit."
    )
    name: str | None = Field(default=None, max_length=200, description="Defaults to the slug.")


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
    body: BucketCreate, response: Response, library: LibraryDep, principal: PrincipalDep
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
def delete_bucket(bucket: str, library: LibraryDep, principal: PrincipalDep) -> BucketDeleted:
    """Delete a bucket with all its sources."""
    bucket_id = library.get_bucket(bucket, principal=principal).id
    library.delete_bucket(bucket_id, principal=principal)
    return BucketDeleted(id=bucket_id)
