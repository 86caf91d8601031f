"""What the Files and Vector Stores APIs keep beside the library, per tenant.

Uploaded files (OpenAI's and Anthropic's Files APIs: one store, so a file uploaded in one
dialect is the same file in the other). Uploading one parses nothing: a request that names it as
a document reads it then, and attaching it to a vector store ingests its bytes as a source of
that bucket (the source keeps its own copy). Each file is two objects under a folder per
tenant: ``<id>.json`` (its metadata) and ``<id>.bin`` (its bytes).

And what a vector store has that its bucket lacks, its metadata: one
``vector_stores/<bucket id>.json`` per bucket that has any.

The objects are in the ``files`` area of the configured ``ObjectStore`` (``files/`` of the data
folder, or the S3 bucket: ``citewell.store.objects``), each written whole.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import secrets
from dataclasses import dataclass

from citewell.errors import NotFound
from citewell.scalar_text import loads_scalar
from citewell.store.objects import ObjectStore

__all__ = ["DEFAULT_PURPOSE", "FileStore", "StoredFile"]

_ID = re.compile(r"file_[0-9A-Za-z]{24}")
_FILE_METADATA = re.compile(rf"({_ID.pattern})\.json")
_BUCKET_ID = re.compile(r"bkt_[0-9A-Za-z]{1,64}")
DEFAULT_PURPOSE = "user_data"
"""OpenAI's purpose of a file read by any request; Anthropic's uploads (which name none) get it."""


@dataclass(frozen=True, slots=True)
class StoredFile:
    id: str
    """``file_`` followed by 24 letters and digits."""
    filename: str
    mime_type: str
    size_bytes: int
    created_at: dt.datetime
    """UTC."""
    purpose: str = DEFAULT_PURPOSE
    """OpenAI's ``purpose``: ``assistants`` or ``user_data``."""


class FileStore:
    def __init__(self, objects: ObjectStore) -> None:
        self.objects = objects

    def put(
        self,
        data: bytes,
        *,
        filename: str,
        mime_type: str,
        tenant_id: str,
        purpose: str = DEFAULT_PURPOSE,
    ) -> StoredFile:
        stored = StoredFile(
            id=f"file_{secrets.token_hex(12)}",
            filename=filename,
            mime_type=mime_type,
            size_bytes=len(data),
            created_at=dt.datetime.now(dt.UTC).replace(microsecond=0),
            purpose=purpose,
        )
        self.objects.put(self._name(stored.id, tenant_id, ".bin"), data)
        metadata = {
            "filename": stored.filename,
            "mime_type": stored.mime_type,
            "size_bytes": stored.size_bytes,
            "created_at": stored.created_at.isoformat(),
            "purpose": stored.purpose,
        }
        self.objects.put(self._name(stored.id, tenant_id, ".json"), json.dumps(metadata).encode())
        return stored

    def get(self, file_id: str, *, tenant_id: str) -> StoredFile:
        """Raises ``NotFound`` for an unknown id (or another tenant's)."""
        try:
            metadata = loads_scalar(self.objects.get(self._name(file_id, tenant_id, ".json")))
        except FileNotFoundError:
            raise _not_found(file_id) from None
        return StoredFile(
            id=file_id,
            filename=metadata["filename"],
            mime_type=metadata["mime_type"],
            size_bytes=metadata["size_bytes"],
            created_at=dt.datetime.fromisoformat(metadata["created_at"]),
            # Files kept before purposes were recorded came from Anthropic's API.
            purpose=metadata.get("purpose", DEFAULT_PURPOSE),
        )

    def content(self, file_id: str, *, tenant_id: str) -> bytes:
        try:
            return self.objects.get(self._name(file_id, tenant_id, ".bin"))
        except FileNotFoundError:
            raise _not_found(file_id) from None

    def list(self, *, tenant_id: str) -> list[StoredFile]:
        """The tenant's files, newest first."""
        folder = self._folder(tenant_id)
        files = []
        for name in self.objects.names(folder):
            if not (found := _FILE_METADATA.fullmatch(name.removeprefix(f"{folder}/"))):
                continue  # its bytes, or a vector store's metadata
            try:
                files.append(self.get(found[1], tenant_id=tenant_id))
            except NotFound:
                continue  # deleted meanwhile
        return sorted(files, key=lambda f: (f.created_at, f.id), reverse=True)

    def delete(self, file_id: str, *, tenant_id: str) -> None:
        self.get(file_id, tenant_id=tenant_id)
        self.objects.delete(self._name(file_id, tenant_id, ".json"))
        self.objects.delete(self._name(file_id, tenant_id, ".bin"))

    # vector stores ---------------------------------------------------------------------------
    def vector_store_metadata(self, bucket_id: str, *, tenant_id: str) -> dict[str, str]:
        """The metadata of a bucket's vector store; empty if it has none."""
        try:
            metadata: dict[str, str] = loads_scalar(
                self.objects.get(self._vector_store_name(bucket_id, tenant_id))
            )
        except FileNotFoundError:
            return {}
        return metadata

    def put_vector_store_metadata(
        self, bucket_id: str, metadata: dict[str, str], *, tenant_id: str
    ) -> None:
        name = self._vector_store_name(bucket_id, tenant_id)
        self.objects.put(name, json.dumps(metadata).encode())

    def delete_vector_store_metadata(self, bucket_id: str, *, tenant_id: str) -> None:
        self.objects.delete(self._vector_store_name(bucket_id, tenant_id))

    def _folder(self, tenant_id: str) -> str:
        return hashlib.sha256(tenant_id.encode()).hexdigest()[:32]

    def _name(self, file_id: str, tenant_id: str, suffix: str) -> str:
        if not _ID.fullmatch(file_id):
            raise _not_found(file_id)
        return f"{self._folder(tenant_id)}/{file_id}{suffix}"

    def _vector_store_name(self, bucket_id: str, tenant_id: str) -> str:
        # Bucket ids come from the store, but they name an object here: never trust a path part.
        if not _BUCKET_ID.fullmatch(bucket_id):
            raise ValueError(f"not a bucket id: {bucket_id[:100]!r}")
        return f"{self._folder(tenant_id)}/vector_stores/{bucket_id}.json"


def _not_found(file_id: str) -> NotFound:
    return NotFound(f"File not found: {file_id[:100]}", param="file_id")
