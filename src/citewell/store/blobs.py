"""Original files, kept once each in a folder named by their SHA-256.

A blob is written to a temporary file, flushed to disk and renamed into place, so a reader never
sees half a file. Blobs are shared: the same bytes ingested into two buckets are kept once.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from citewell.errors import NotFound

__all__ = ["BlobStore", "content_hash"]


def content_hash(data: bytes) -> str:
    """The SHA-256 of ``data``, hex: the identity of an original file."""
    return hashlib.sha256(data).hexdigest()


class BlobStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def path(self, digest: str) -> Path:
        if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
            raise ValueError(f"not a SHA-256 digest: {digest!r}")
        return self.root / digest[:2] / digest

    def put(self, data: bytes, digest: str) -> None:
        """Store ``data`` under ``digest`` (its SHA-256), unless it is already there."""
        target = self.path(digest)
        if target.exists():
            return
        target.parent.mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get(self, digest: str) -> bytes:
        try:
            return self.path(digest).read_bytes()
        except FileNotFoundError:
            raise NotFound(f"original file {digest} is missing from the blob store") from None

    def delete(self, digest: str) -> None:
        self.path(digest).unlink(missing_ok=True)

    def sweep_temporary(self) -> None:
        """Remove temporary files left by a writer that died mid-write."""
        for tmp in self.root.glob("*/.tmp-*"):
            tmp.unlink(missing_ok=True)
