"""The bucket archive: one bucket's originals and the record of its sources, in one zip file.

``Library.export_bucket`` writes it and ``Library.import_bucket`` reads it back into any store:

    manifest.json           the Manifest below, as JSON
    originals/<sha256>      the bytes of each original file, once, named by their SHA-256

The manifest lists every version of every file the exporter could see, each file's versions
oldest first, with what re-ingesting needs (file name, media type, ACL labels, metadata,
effective date) and what checks the bytes (hash, size). Nothing derived is kept: an import
parses, chunks and embeds the originals again with its own settings.

An archive is input from anywhere, so reading one trusts nothing: only the two kinds of entry
above, no more than the ingest limits unpacked, every original present and matching its hash.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from citewell.config import IngestSettings
from citewell.errors import ParseError
from citewell.ingest.limits import check_limit
from citewell.model import Bucket, MetadataValue, Source

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "ArchiveReader",
    "ArchivedBucket",
    "ArchivedSource",
    "Manifest",
    "manifest_of",
    "read_archive",
    "write_archive",
]

FORMAT: Final = "citewell.bucket"
FORMAT_VERSION: Final = 1
"""Raised whenever readers of the previous version could not read what is written."""
MANIFEST = "manifest.json"
ORIGINALS = "originals/"
_ORIGINAL = re.compile(r"originals/([0-9a-f]{64})")
_COMPRESSIONS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ArchivedSource(_Record):
    """One version of one file, as exported."""

    id: str = Field(description="The source's id in the exporting store.")
    filename: str = Field(min_length=1, description="Name of the original file.")
    mime_type: str = Field(min_length=1, description="Media type of the original file.")
    content_hash: str = Field(
        pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the original, hex; names its entry."
    )
    byte_size: int = Field(ge=0, description="Size of the original in bytes.")
    version: int = Field(ge=1, description="Its version number in the exporting store.")
    supersedes: str | None = Field(
        description="Id of the previous version of the file in this archive; None for the first."
    )
    acl: list[str] = Field(description="ACL labels, sorted.")
    metadata: dict[str, MetadataValue] = Field(description="Attributes for filters.")
    effective_date: dt.date | None = Field(description="From when the content applies.")
    created_at: dt.datetime = Field(description="When the exporting store ingested it (UTC).")


class ArchivedBucket(_Record):
    slug: str = Field(description="The bucket's slug; an import uses it unless told another.")
    name: str = Field(description="The bucket's human-readable name.")


class Manifest(_Record):
    """``manifest.json``: what the archive holds."""

    format: Literal["citewell.bucket"] = FORMAT
    format_version: Literal[1] = FORMAT_VERSION
    exported_at: dt.datetime = Field(description="When the archive was written (UTC).")
    bucket: ArchivedBucket
    sources: list[ArchivedSource] = Field(
        description="Every version of every file, each file's versions oldest first."
    )


def manifest_of(bucket: Bucket, sources: Sequence[Source]) -> Manifest:
    """The manifest of these sources of the bucket, given each file's versions oldest first.

    A version's ``supersedes`` is the version before it *in the archive*, so that the chain
    stays whole when the exporter may not see every version.
    """
    previous: dict[str, str] = {}
    archived = []
    for source in sources:
        archived.append(
            ArchivedSource(
                id=source.id,
                filename=source.filename,
                mime_type=source.mime_type,
                content_hash=source.content_hash,
                byte_size=source.byte_size,
                version=source.version,
                supersedes=previous.get(source.filename),
                acl=sorted(source.acl),
                metadata=dict(source.metadata),
                effective_date=source.effective_date,
                created_at=source.created_at,
            )
        )
        previous[source.filename] = source.id
    return Manifest(
        exported_at=dt.datetime.now(dt.UTC),
        bucket=ArchivedBucket(slug=bucket.slug, name=bucket.name),
        sources=archived,
    )


def write_archive(
    target: IO[bytes], manifest: Manifest, original: Callable[[ArchivedSource], bytes]
) -> None:
    """Write the archive to ``target``, reading one original at a time.

    A bucket holds given bytes once, so each original is one source's.
    """
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(MANIFEST, manifest.model_dump_json(indent=2))
        for source in manifest.sources:
            archive.writestr(ORIGINALS + source.content_hash, original(source))


class ArchiveReader:
    """An archive whose entries and manifest were checked; ``original`` reads and checks one
    file's bytes."""

    def __init__(self, archive: zipfile.ZipFile, manifest: Manifest, name: str) -> None:
        self.manifest = manifest
        self._archive = archive
        self._name = name

    def original(self, source: ArchivedSource) -> bytes:
        """The bytes of the source's original, refused unless they match its hash and size."""
        entry = ORIGINALS + source.content_hash
        # zipfile unpacks no more than the size the entry declares, which was checked.
        data = _unpack(self._archive, entry, self._name)
        if len(data) != source.byte_size or hashlib.sha256(data).hexdigest() != source.content_hash:
            raise _damaged(self._name, f"{entry} does not match its SHA-256 and size")
        return data


@contextmanager
def read_archive(
    source: IO[bytes], limits: IngestSettings, *, name: str = "the archive"
) -> Iterator[ArchiveReader]:
    """Open an archive for reading, after checking its entries and its manifest.

    Raises ``ParseError`` for anything but a bucket archive of this format version, and
    ``FileTooLarge`` when it unpacks to more than ``limits.max_unpacked_bytes`` or holds an
    entry over ``limits.max_file_bytes``. ``name`` is how messages call it.
    """
    try:
        archive = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, EOFError, ValueError) as exc:
        raise _damaged(name, f"not a zip file ({exc})") from exc
    with archive:
        infos = archive.infolist()
        _check_entries(infos, limits, name)
        manifest = _manifest(archive, name)
        expected = {ORIGINALS + s.content_hash for s in manifest.sources}
        present = {i.filename for i in infos if _ORIGINAL.fullmatch(i.filename)}
        if missing := sorted(expected - present):
            raise _damaged(name, f"{missing[0]} is listed in the manifest but missing")
        if extra := sorted(present - expected):
            raise _damaged(name, f"{extra[0]} is not listed in the manifest")
        yield ArchiveReader(archive, manifest, name)


def _damaged(name: str, reason: str) -> ParseError:
    return ParseError(f"{name} is not a valid bucket archive: {reason}", filename=name)


def _unpack(archive: zipfile.ZipFile, entry: str, name: str) -> bytes:
    try:
        return archive.read(entry)
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise _damaged(name, f"{entry} cannot be unpacked ({exc})") from exc


def _check_entries(infos: Sequence[zipfile.ZipInfo], limits: IngestSettings, name: str) -> None:
    """Only the manifest and originals named by a hash, each once, unencrypted and within the
    limits (the sizes zipfile unpacks to are the ones declared here)."""
    seen: set[str] = set()
    for info in infos:
        if info.filename != MANIFEST and not _ORIGINAL.fullmatch(info.filename):
            raise _damaged(name, f"unexpected entry {info.filename!r}")
        if info.filename in seen:
            raise _damaged(name, f"the entry {info.filename!r} appears twice")
        seen.add(info.filename)
        if info.flag_bits & 0x1:
            raise _damaged(name, f"{info.filename} is encrypted")
        if info.compress_type not in _COMPRESSIONS:
            raise _damaged(name, f"{info.filename} uses an unsupported compression method")
        check_limit(
            info.file_size,
            limits.max_file_bytes,
            what="bytes",
            setting="max_file_bytes",
            filename=f"{name}: {info.filename}",
        )
    if MANIFEST not in seen:
        raise _damaged(name, f"it has no {MANIFEST}")
    check_limit(
        sum(i.file_size for i in infos),
        limits.max_unpacked_bytes,
        what="bytes unpacked",
        setting="max_unpacked_bytes",
        filename=name,
    )


def _manifest(archive: zipfile.ZipFile, name: str) -> Manifest:
    try:
        raw = json.loads(_unpack(archive, MANIFEST, name))
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, or nested absurdly deep
        raise _damaged(name, f"{MANIFEST} is not JSON ({exc})") from exc
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise _damaged(name, f"{MANIFEST} does not describe a {FORMAT} archive")
    if raw.get("format_version") != FORMAT_VERSION:
        raise _damaged(
            name,
            f"format version {raw.get('format_version')!r} is not supported"
            f" (this citewell reads version {FORMAT_VERSION})",
        )
    try:
        manifest = Manifest.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise _damaged(name, f"{MANIFEST}: {where}: {error['msg']}") from exc
    _check_chain(manifest.sources, name)
    return manifest


def _check_chain(sources: Sequence[ArchivedSource], name: str) -> None:
    """Each version supersedes the one before it of the same file, and no bytes come twice."""
    latest: dict[str, str] = {}
    hashes: set[str] = set()
    for source in sources:
        if source.content_hash in hashes:
            raise _damaged(name, f"the original {source.content_hash} is listed twice")
        hashes.add(source.content_hash)
        if source.supersedes != latest.get(source.filename):
            raise _damaged(name, f"the versions of {source.filename!r} are out of order")
        latest[source.filename] = source.id
