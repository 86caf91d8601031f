"""Original files, kept once each under their SHA-256, in the blob store's ``ObjectStore``
(a folder of the data folder, or an S3 bucket: ``citewell.store.objects``).

Blobs are shared: the same bytes ingested into two buckets, or as two sources, are kept once,
and a store deletes a blob only when no source (nor background ingest) holds it any more.
"""

from __future__ import annotations

import hashlib

from citewell.errors import NotFound
from citewell.store.objects import ObjectStore

__all__ = ["BlobStore", "content_hash"]


def content_hash(data: bytes) -> str:
    """The SHA-256 of ``data``, hex: the identity of an original file."""
    return hashlib.sha256(data).hexdigest()


class BlobStore:
    def __init__(self, objects: ObjectStore) -> None:
        self.objects = objects

    def put(self, data: bytes, digest: str) -> None:
        """Store ``data`` under ``digest`` (its SHA-256), unless it is already there."""
        if not self.exists(digest):
            self.objects.put(_name(digest), data)

    def get(self, digest: str) -> bytes:
        try:
            return self.objects.get(_name(digest))
        except FileNotFoundError:
            raise NotFound(f"original file {digest} is missing from the blob store") from None

    def exists(self, digest: str) -> bool:
        return self.objects.exists(_name(digest))

    def delete(self, digest: str) -> None:
        self.objects.delete(_name(digest))

    def sweep_temporary(self) -> None:
        """Remove what writers that died mid-write left behind."""
        self.objects.sweep_temporary()


def _name(digest: str) -> str:
    """``ab/abcd…``: a folder per first byte keeps folders small."""
    if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
        raise ValueError(f"not a SHA-256 digest: {digest!r}")
    return f"{digest[:2]}/{digest}"
