"""Where the bytes kept beside the store live: originals (``citewell.store.objects.blobs``) and the
Files APIs' uploads (``citewell.uploads``).

An ``ObjectStore`` keeps byte strings under names like ``ab/abcd…`` in one area (``blobs`` or
``files``). By default an area is a folder of the data folder (``FolderObjects``), which
servers sharing one database must then share too; with ``CITEWELL_BLOBS__URL`` set it is a prefix
of an S3-compatible bucket (``citewell.store.objects.s3``), which every server reaches on its own.

A write replaces the whole object at once: a reader sees the old bytes or the new ones, never
part of either.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Protocol

from citewell.config import Settings

__all__ = ["FolderObjects", "ObjectStore", "open_objects"]

_TEMPORARY = ".tmp-"


class ObjectStore(Protocol):
    """Byte strings by name. A name is ``/``-separated parts of letters, digits, ``_.-``."""

    def put(self, name: str, data: bytes) -> None: ...

    def get(self, name: str) -> bytes:
        """Raises ``FileNotFoundError`` when there is no such object."""
        ...

    def exists(self, name: str) -> bool: ...

    def delete(self, name: str) -> None:
        """Remove the object, if there is one."""
        ...

    def names(self, folder: str) -> list[str]:
        """The names of the objects under ``folder`` (a leading part of names), in any order."""
        ...

    def sweep_temporary(self) -> None:
        """Remove what writers that died mid-write left behind."""
        ...


class FolderObjects:
    """Objects as files under ``root``: each written to a temporary file beside it, flushed to
    disk and renamed into place."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def path(self, name: str) -> Path:
        parts = name.split("/")
        if any(part in ("", ".", "..") or part.startswith(_TEMPORARY) for part in parts):
            raise ValueError(f"not an object name: {name[:100]!r}")
        return self.root.joinpath(*parts)

    def put(self, name: str, data: bytes) -> None:
        target = self.path(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=_TEMPORARY)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get(self, name: str) -> bytes:
        return self.path(name).read_bytes()

    def exists(self, name: str) -> bool:
        return self.path(name).is_file()

    def delete(self, name: str) -> None:
        self.path(name).unlink(missing_ok=True)

    def names(self, folder: str) -> list[str]:
        return [
            path.relative_to(self.root).as_posix()
            for path in self.path(folder).rglob("*")
            if path.is_file() and not path.name.startswith(_TEMPORARY)
        ]

    def sweep_temporary(self) -> None:
        for tmp in self.root.rglob(f"{_TEMPORARY}*"):
            tmp.unlink(missing_ok=True)


def open_objects(settings: Settings, area: str) -> ObjectStore:
    """The configured store of one area: the S3 bucket of ``blobs.url``, else the data folder."""
    if settings.blobs.url is None:
        return FolderObjects(settings.data_dir / area)
    from citewell.store.objects.s3 import S3Objects

    return S3Objects(settings.blobs, area)
