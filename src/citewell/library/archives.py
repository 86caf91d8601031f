"""A bucket as one file and back (``citewell.bucket_archive`` is the format): what
``Library.export_bucket`` and ``Library.import_bucket`` do.

An import fills a bucket that nobody sees, named ``_importing-…`` (no slug a caller may choose
starts with '_'), and gives it its slug only once every file is in: one that fails is deleted,
and one that a crash left behind is dropped at the next open.
"""

from __future__ import annotations

import secrets
from typing import IO, TYPE_CHECKING

from citewell.bucket_archive import (
    ArchiveReader,
    Manifest,
    manifest_of,
    read_archive,
    write_archive,
)
from citewell.errors import Conflict, NotFound, ParseError
from citewell.library import checks
from citewell.model import Bucket, IngestOutcome, Principal
from citewell.store import Store

if TYPE_CHECKING:
    from citewell.library.library import Library

__all__ = ["drop_abandoned_imports", "export_bucket", "import_bucket", "is_staging"]

_STAGING = "_importing-"
"""Slug prefix of a bucket being imported."""


def is_staging(slug: str) -> bool:
    """Whether a bucket is an import under way (or one a crash left behind)."""
    return slug.startswith(_STAGING)


def export_bucket(
    library: Library, id_or_slug: str, target: IO[bytes], principal: Principal
) -> Manifest:
    bucket = library.get_bucket(id_or_slug, principal=principal)
    sources = library.list_sources(bucket.id, include_superseded=True, principal=principal)
    manifest = manifest_of(bucket, sources)
    write_archive(
        target, manifest, lambda archived: library.original(archived.id, principal=principal)
    )
    return manifest


def import_bucket(
    library: Library, archive: IO[bytes], slug: str | None, name: str, principal: Principal
) -> Bucket:
    store = library.store
    with read_archive(archive, library.settings.ingest, name=name) as reader:
        target = slug or reader.manifest.bucket.slug
        checks.check_slug(target)
        checks.may_create_buckets(principal)
        _refuse_taken(store, target, principal)
        staging = store.create_bucket(
            f"{_STAGING}{secrets.token_hex(8)}",
            tenant_id=principal.tenant_id,
            name=reader.manifest.bucket.name,
        )
        try:
            _ingest_archived(library, reader, staging, name, principal)
            return store.rename_bucket(staging.id, slug=target)
        except BaseException:
            store.delete_bucket(staging.id)
            raise


def drop_abandoned_imports(store: Store) -> None:
    for tenant in store.list_tenants():
        for bucket in store.list_buckets(tenant_id=tenant.id):
            if is_staging(bucket.slug):
                store.delete_bucket(bucket.id)


def _refuse_taken(store: Store, slug: str, principal: Principal) -> None:
    """Refuse a slug in use before a long import, not after it."""
    try:
        store.get_bucket(slug, tenant_id=principal.tenant_id)
    except NotFound:
        return
    raise Conflict(f"a bucket with slug '{slug}' already exists", param="slug")


def _ingest_archived(
    library: Library, reader: ArchiveReader, bucket: Bucket, name: str, principal: Principal
) -> None:
    imported: dict[str, str] = {}  # id of each archived source -> id of its copy
    for archived in reader.manifest.sources:
        result = library.ingest(
            reader.original(archived),
            filename=archived.filename,
            bucket=bucket.id,
            media_type=archived.mime_type,
            effective_date=archived.effective_date,
            acl=frozenset(archived.acl),
            metadata=archived.metadata,
            principal=principal,
        )
        expected = imported[archived.supersedes] if archived.supersedes else None
        superseded = result.superseded.id if result.superseded else None
        if result.outcome is IngestOutcome.UNCHANGED or superseded != expected:
            # Only a manifest at odds with itself gets here (two names that clean to one).
            raise ParseError(
                f"{name}: {archived.filename} would not become the version it lists",
                filename=name,
            )
        imported[archived.id] = result.source.id
