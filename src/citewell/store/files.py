"""What the Files and Vector Stores APIs keep beside the library, per tenant.

Uploaded files (OpenAI's and Anthropic's Files APIs: one store, so a file uploaded in one
dialect is the same file in the other). Uploading one parses nothing: a request that names it as
a document reads it then, and attaching it to a vector store ingests its bytes as a source of
that bucket (the source keeps its own copy). Each file is two entries in a folder per tenant:
``<id>.json`` (its metadata) and ``<id>.bin`` (its bytes).

And what a vector store has that its bucket lacks, its metadata: one
``vector_stores/<bucket id>.json`` per bucket that has any.

Every entry is written to a temporary file and renamed into place.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path

from citewell.errors import NotFound

__all__ = ["DEFAULT_PURPOSE", "FileStore", "StoredFile"]

_ID = re.compile(r"file_[0-9A-Za-z]{24}")
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
    def __init__(self, root: Path) -> None:
        self.root = root

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
        folder = self._folder(tenant_id)
        folder.mkdir(parents=True, exist_ok=True)
        _write(folder / f"{stored.id}.bin", data)
        metadata = {
            "filename": stored.filename,
            "mime_type": stored.mime_type,
            "size_bytes": stored.size_bytes,
            "created_at": stored.created_at.isoformat(),
            "purpose": stored.purpose,
        }
        _write(folder / f"{stored.id}.json", json.dumps(metadata).encode())
        return stored

    def get(self, file_id: str, *, tenant_id: str) -> StoredFile:
        """Raises ``NotFound`` for an unknown id (or another tenant's)."""
        path = self._path(file_id, tenant_id, ".json")
        try:
            metadata = json.loads(path.read_text())
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
            return self._path(file_id, tenant_id, ".bin").read_bytes()
        except FileNotFoundError:
            raise _not_found(file_id) from None

    def list(self, *, tenant_id: str) -> list[StoredFile]:
        """The tenant's files, newest first."""
        folder = self._folder(tenant_id)
        if not folder.is_dir():
            return []
        files = []
        for path in folder.glob("file_*.json"):
            try:
                files.append(self.get(path.stem, tenant_id=tenant_id))
            except NotFound:
                continue  # deleted meanwhile
        return sorted(files, key=lambda f: (f.created_at, f.id), reverse=True)

    def delete(self, file_id: str, *, tenant_id: str) -> None:
        self.get(file_id, tenant_id=tenant_id)
        self._path(file_id, tenant_id, ".json").unlink(missing_ok=True)
        self._path(file_id, tenant_id, ".bin").unlink(missing_ok=True)

    # vector stores ---------------------------------------------------------------------------
    def vector_store_metadata(self, bucket_id: str, *, tenant_id: str) -> dict[str, str]:
        """The metadata of a bucket's vector store; empty if it has none."""
        try:
            metadata: dict[str, str] = json.loads(
                self._vector_store_path(bucket_id, tenant_id).read_text()
            )
        except FileNotFoundError:
            return {}
        return metadata

    def put_vector_store_metadata(
        self, bucket_id: str, metadata: dict[str, str], *, tenant_id: str
    ) -> None:
        path = self._vector_store_path(bucket_id, tenant_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        _write(path, json.dumps(metadata).encode())

    def delete_vector_store_metadata(self, bucket_id: str, *, tenant_id: str) -> None:
        self._vector_store_path(bucket_id, tenant_id).unlink(missing_ok=True)

    def _folder(self, tenant_id: str) -> Path:
        return self.root / hashlib.sha256(tenant_id.encode()).hexdigest()[:32]

    def _path(self, file_id: str, tenant_id: str, suffix: str) -> Path:
        if not _ID.fullmatch(file_id):
            raise _not_found(file_id)
        return self._folder(tenant_id) / f"{file_id}{suffix}"

    def _vector_store_path(self, bucket_id: str, tenant_id: str) -> Path:
        # Bucket ids come from the store, but they name a file here: never trust a path part.
        if not _BUCKET_ID.fullmatch(bucket_id):
            raise ValueError(f"not a bucket id: {bucket_id[:100]!r}")
        return self._folder(tenant_id) / "vector_stores" / f"{bucket_id}.json"


def _not_found(file_id: str) -> NotFound:
    return NotFound(f"File not found: {file_id[:100]}", param="file_id")


def _write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
