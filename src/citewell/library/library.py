"""``Library``: buckets and sources in one store, searched with one embedder; every rule of
who may see, store, replace and delete what (``checks`` holds the refusals)."""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO

import numpy as np

from citewell.access import KeyRing
from citewell.bucket_archive import Manifest
from citewell.cite.regions import regions
from citewell.config import Settings
from citewell.documents import (
    GivenDocuments,
    RequestDocument,
    RequestSearchResult,
    given_documents,
)
from citewell.embed import open_embedder
from citewell.embed.base import Embedder
from citewell.errors import (
    ConfigError,
    Conflict,
    InvalidRequest,
    NotFound,
    QuotaExceeded,
)
from citewell.ingest import detect_media_type, parse, read_limited
from citewell.ingest.chunk import chunk_document, chunk_text_for_embedding
from citewell.ingest.ocr import Ocr, Progress, Recogniser
from citewell.ingest.segment import sentence_spans
from citewell.jobs import JobRunner
from citewell.language import detect_language
from citewell.library import archives, checks
from citewell.model import (
    Box,
    Bucket,
    IngestJob,
    IngestOutcome,
    IngestResult,
    MetadataValue,
    Page,
    Passage,
    Principal,
    SearchRequest,
    Source,
    Span,
)
from citewell.retrieve.search import search
from citewell.store import Store, open_store
from citewell.store.base import SourceDraft, Vectors, new_source_id
from citewell.store.objects import open_objects
from citewell.store.objects.blobs import content_hash
from citewell.uploads import FileStore

__all__ = ["Library", "copy_to_postgres"]

logger = logging.getLogger(__name__)

LOCAL = Principal.local()

_EMBED_BATCH = 64

FILE_ID_KEY = "file_id"
"""Metadata key of a source ingested from an uploaded file (``POST /v1/files``): the file's id."""


class Library:
    """Buckets and sources in one store, searched with one embedder.

    Every method takes the ``principal`` acting; the default is the single local user of an
    embedded installation, who sees everything.
    """

    def __init__(self, settings: Settings, store: Store, embedder: Embedder) -> None:
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self._backfill_lock = threading.Lock()
        self._recogniser = Recogniser(settings.ocr)
        self._jobs = JobRunner(settings, store, self._ingest_job)
        self._budget_lock = threading.Lock()  # the OCR budget is checked and spent at once
        self.keys = KeyRing(store, admin_key=settings.admin_key)
        """Tenants and API keys, and who each key stands for."""
        self.files = FileStore(open_objects(settings, "files"))
        """Files uploaded through the Files APIs, kept beside the library (``citewell.uploads``)."""

    @classmethod
    def open(cls, settings: Settings, embedder: Embedder | None = None) -> Library:
        """The library ``settings`` describe, searched with ``embedder`` (default: the one
        ``settings.retrieve.embedder`` names)."""
        embedder = embedder or open_embedder(settings)
        store = open_store(settings, embedder=embedder.name, dim=embedder.dim)
        archives.drop_abandoned_imports(store)
        return cls(settings, store, embedder)

    def close(self) -> None:
        """Close the store, after background ingests have stopped: pages not yet read by OCR
        are cancelled, pages being read are finished, and the ingests that did not end are
        given back to the store, for the next process on it to read again."""
        self._jobs.stop()
        self._recogniser.close()
        self._jobs.close()
        self.store.close()

    def start_worker(self) -> None:
        """Keep, until ``close``, the leases of this library's background ingests, and take
        over those whose process died (``Library.submit``). Once is enough."""
        self._jobs.start_worker()

    def ocr(self, progress: Progress | None = None) -> Ocr:
        """OCR for one document, on the process's pool of OCR workers."""
        return Ocr(self._recogniser, progress)

    def read_documents(
        self, items: Sequence[RequestDocument | RequestSearchResult]
    ) -> GivenDocuments:
        """A request's own documents and search results as passages to answer from, never
        stored (scanned PDFs read with OCR, on the same workers as ingests)."""
        return given_documents(items, limits=self.settings.ingest, ocr=self.ocr())

    def __enter__(self) -> Library:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # buckets ---------------------------------------------------------------------------------
    def create_bucket(
        self, slug: str, *, name: str | None = None, principal: Principal = LOCAL
    ) -> Bucket:
        """Create a bucket, or return the existing one with this slug."""
        checks.check_slug(slug)
        checks.may_create_buckets(principal)
        return self.store.create_bucket(slug, tenant_id=principal.tenant_id, name=name)

    def get_bucket(self, id_or_slug: str, *, principal: Principal = LOCAL) -> Bucket:
        bucket = self.store.get_bucket(id_or_slug, tenant_id=principal.tenant_id)
        if principal.bucket_ids is not None and bucket.id not in principal.bucket_ids:
            # Indistinguishable from a bucket that does not exist, on purpose.
            raise NotFound(f"no bucket '{id_or_slug}'", param="bucket")
        return bucket

    def list_buckets(self, *, principal: Principal = LOCAL) -> list[Bucket]:
        buckets = self.store.list_buckets(tenant_id=principal.tenant_id)
        return [
            b
            for b in buckets
            if not archives.is_staging(b.slug)
            and (principal.bucket_ids is None or b.id in principal.bucket_ids)
        ]

    def rename_bucket(
        self,
        id_or_slug: str,
        *,
        slug: str | None = None,
        name: str | None = None,
        principal: Principal = LOCAL,
    ) -> Bucket:
        """Give a bucket a new slug and/or name; None keeps the current one.

        Raises ``Conflict`` when another bucket has the slug.
        """
        if slug is not None:
            checks.check_slug(slug)
        if name is not None and not name.strip():
            raise InvalidRequest("a bucket name cannot be empty", param="name")
        bucket = self.get_bucket(id_or_slug, principal=principal)
        return self.store.rename_bucket(bucket.id, slug=slug, name=name)

    def delete_bucket(self, id_or_slug: str, *, principal: Principal = LOCAL) -> None:
        self.store.delete_bucket(self.get_bucket(id_or_slug, principal=principal).id)

    def export_bucket(
        self, id_or_slug: str, target: IO[bytes], *, principal: Principal = LOCAL
    ) -> Manifest:
        """Write the bucket's archive (``citewell.bucket_archive``) to ``target``: every version
        of every file the caller sees, with the manifest that ``import_bucket`` reads."""
        return archives.export_bucket(self, id_or_slug, target, principal)

    def import_bucket(
        self,
        archive: IO[bytes],
        *,
        slug: str | None = None,
        name: str = "the archive",
        principal: Principal = LOCAL,
    ) -> Bucket:
        """Ingest an exported bucket into a new bucket of the caller's tenant, each file with
        its name, ACL labels and metadata, each file's versions oldest first.

        The bucket takes ``slug``, else the archive's, and appears only once every file is in
        (``citewell.library.archives``). Raises ``Conflict`` when the slug is taken;
        ``ParseError`` or ``FileTooLarge`` for an archive that is damaged, hostile or over the
        ingest limits (``name`` names it).
        """
        return archives.import_bucket(self, archive, slug, name, principal)

    # sources ---------------------------------------------------------------------------------
    def ingest(
        self,
        data: bytes,
        *,
        filename: str,
        bucket: str,
        media_type: str | None = None,
        effective_date: dt.date | None = None,
        acl: frozenset[str] = frozenset(),
        metadata: Mapping[str, MetadataValue] | None = None,
        principal: Principal = LOCAL,
        progress: Progress | None = None,
        source_id: str | None = None,
    ) -> IngestResult:
        """Store one file in a bucket: parse, segment, chunk, embed, index — atomically.

        The same bytes twice are stored once (``unchanged``); other bytes under a filename the
        bucket already holds become a new version that supersedes the current one. Both only
        within what the caller sees: of a source hidden from it by its ACL labels, the caller
        learns nothing, and replaces nothing. Pages of
        pixels only are read with OCR, by the library's bounded pool; ``progress`` hears of
        every page it reads. ``source_id`` is the id promised for the source (``submit``).
        """
        target = self.get_bucket(bucket, principal=principal)
        filename = checks.clean_filename(filename)
        attributes = checks.clean_metadata(metadata or {})
        checks.may_label(acl, principal)
        digest = content_hash(data)
        existing = self._held(target.id, digest, principal)
        if existing is not None:
            return IngestResult(outcome=IngestOutcome.UNCHANGED, source=existing)
        draft = self._draft(
            data, digest, target, filename, media_type, effective_date, acl, attributes, progress
        )
        draft = replace(draft, id=source_id or draft.id, writer=principal)
        try:
            source = self.store.add_source(draft)
        except Conflict:
            # Someone stored the same bytes while we were parsing: theirs stands.
            existing = self._held(target.id, digest, principal)
            if existing is None:
                raise
            return IngestResult(outcome=IngestOutcome.UNCHANGED, source=existing)
        if source.supersedes is None:
            return IngestResult(outcome=IngestOutcome.CREATED, source=source)
        return IngestResult(
            outcome=IngestOutcome.NEW_VERSION,
            source=source,
            superseded=self.store.get_source(source.supersedes),
        )

    def submit(
        self,
        data: bytes,
        *,
        filename: str,
        bucket: str,
        effective_date: dt.date | None = None,
        acl: frozenset[str] = frozenset(),
        metadata: Mapping[str, MetadataValue] | None = None,
        principal: Principal = LOCAL,
    ) -> IngestResult | IngestJob:
        """``ingest``, going on in the background once OCR turns out to be needed.

        Returns the ``IngestResult`` when the file needed no OCR; else the ``IngestJob`` of the
        source being read (``ingest_job``), the same job for the same bytes sent again to the
        bucket meanwhile. Whatever fails before OCR starts is raised here, as by ``ingest``;
        ``QuotaExceeded`` when the tenant's pages waiting for OCR, with this file's, would be
        over ``IngestSettings.max_tenant_ocr_pages``.
        """
        target = self.get_bucket(bucket, principal=principal)
        checks.may_label(acl, principal)
        digest = content_hash(data)
        running = self.store.find_jobs(target.id, digest)
        seen = next((job for job in running if principal.can_see(job.acl)), None)
        if seen is not None:
            return seen
        job = IngestJob(
            source_id=new_source_id(),
            tenant_id=target.tenant_id,
            bucket_id=target.id,
            filename=checks.clean_filename(filename),
            mime_type=detect_media_type(data, filename),
            content_hash=digest,
            byte_size=len(data),
            acl=acl,
            metadata=checks.clean_metadata(metadata or {}),
            effective_date=effective_date,
            created_at=dt.datetime.now(dt.UTC),
            submitter_labels=None if principal.sees_all_labels else principal.acl_labels,
        )
        ocr_started = threading.Event()

        def started(total: int) -> None:
            # Only now is it a job: a file that needs no OCR is stored before submit returns.
            with self._budget_lock:
                self._within_ocr_budget(job.tenant_id, total)
                self.store.add_job(
                    replace(job, pages_total=total),
                    data,
                    owner=self._jobs.worker_id,
                    lease_seconds=self.settings.jobs.lease_seconds,
                )
            self.start_worker()
            ocr_started.set()

        future = self._jobs.start(job, data, started)
        future.add_done_callback(lambda _: ocr_started.set())
        ocr_started.wait()
        if future.done():
            return future.result()
        return self.store.get_job(job.source_id)

    def ingest_job(self, source_id: str, *, principal: Principal = LOCAL) -> IngestJob:
        """The background ingest (``submit``) of a source, while it runs and after it ended.

        Raises ``NotFound`` for none, or one in a bucket or under an ACL the caller cannot see.
        """
        job = self.store.get_job(source_id)
        if not (principal.can_see(job.acl) and self._reaches(job.bucket_id, principal)):
            raise checks.no_source(source_id)
        return job

    def ingest_jobs(self, bucket: str, *, principal: Principal = LOCAL) -> list[IngestJob]:
        """The background ingests into a bucket that the caller may see, oldest first: those
        under way, and those that ended lately (``ingest_job``)."""
        target = self.get_bucket(bucket, principal=principal)
        return [job for job in self.store.list_jobs(target.id) if principal.can_see(job.acl)]

    def forget_job(self, source_id: str, *, principal: Principal = LOCAL) -> None:
        """Forget a background ingest: one that ended is no longer reported, one under way is
        cancelled (OCR stops at its next page, wherever it runs, and nothing is stored).

        Raises ``NotFound`` as ``ingest_job`` does.
        """
        self.store.delete_job(self.ingest_job(source_id, principal=principal).source_id)

    def ingest_path(self, path: Path | str, *, bucket: str, **options: object) -> IngestResult:
        """``ingest`` a file from disk; its size is checked before it is read."""
        path = Path(path)
        data = read_limited(path, self.settings.ingest)
        return self.ingest(data, filename=path.name, bucket=bucket, **options)  # type: ignore[arg-type]

    def list_sources(
        self, bucket: str, *, include_superseded: bool = False, principal: Principal = LOCAL
    ) -> list[Source]:
        target = self.get_bucket(bucket, principal=principal)
        sources = self.store.list_sources(target.id, include_superseded=include_superseded)
        return [s for s in sources if principal.can_see(s.acl)]

    def get_source(self, source_id: str, *, principal: Principal = LOCAL) -> Source:
        source = self.store.get_source(source_id)
        if not (principal.can_see(source.acl) and self._reaches(source.bucket_id, principal)):
            raise checks.no_source(source_id)
        return source

    def jobs_of_file(self, file_id: str, *, principal: Principal = LOCAL) -> list[IngestJob]:
        """The background ingests of an uploaded file (``metadata[FILE_ID_KEY]``), running and
        ended, in every bucket the caller sees."""
        return [
            job
            for bucket in self.list_buckets(principal=principal)
            for job in self.ingest_jobs(bucket.id, principal=principal)
            if job.metadata.get(FILE_ID_KEY) == file_id
        ]

    def sources_from_file(
        self, file_id: str, *, bucket: str | None = None, principal: Principal = LOCAL
    ) -> list[Source]:
        """Every version ingested from an uploaded file (``metadata[FILE_ID_KEY]``), in one
        bucket or in every bucket the caller sees."""
        buckets = (
            [self.get_bucket(bucket, principal=principal)]
            if bucket is not None
            else self.list_buckets(principal=principal)
        )
        return [
            source
            for b in buckets
            for source in self.list_sources(b.id, include_superseded=True, principal=principal)
            if source.metadata.get(FILE_ID_KEY) == file_id
        ]

    def delete_source(self, source_id: str, *, principal: Principal = LOCAL) -> None:
        """Delete one version; a source still being read with OCR is cancelled (``forget_job``),
        and one whose ingest failed is forgotten."""
        try:
            source = self.get_source(source_id, principal=principal)
        except NotFound:
            self.forget_job(source_id, principal=principal)
            return
        self.store.delete_source(source.id)

    def source_text(self, source_id: str, *, principal: Principal = LOCAL) -> str:
        """The canonical text that every span of the source indexes."""
        return self.store.source_text(self.get_source(source_id, principal=principal).id)

    def source_pages(self, source_id: str, *, principal: Principal = LOCAL) -> tuple[Page, ...]:
        return self.store.source_pages(self.get_source(source_id, principal=principal).id)

    def original(self, source_id: str, *, principal: Principal = LOCAL) -> bytes:
        """The bytes of the original file."""
        return self.store.original(self.get_source(source_id, principal=principal).id)

    def highlight(
        self, source_id: str, page: Page, span: Span, *, principal: Principal = LOCAL
    ) -> tuple[Box, ...]:
        """The boxes of ``span``'s characters on ``page`` of the source: what a page picture
        draws around a cited range."""
        source = self.get_source(source_id, principal=principal)
        text = self.store.source_text(source.id)[span.start : span.end]
        found = regions([page], span, text, lambda number: self.store.char_boxes(source.id, number))
        return found[0].boxes if found else ()

    # search ----------------------------------------------------------------------------------
    def search(self, request: SearchRequest, *, principal: Principal = LOCAL) -> list[Passage]:
        """Ranked passages for a query, without generation."""
        buckets = [self.get_bucket(b, principal=principal) for b in request.bucket_ids]
        return self.search_buckets(request, buckets, principal=principal)

    def search_buckets(
        self, request: SearchRequest, buckets: Sequence[Bucket], *, principal: Principal = LOCAL
    ) -> list[Passage]:
        """``search`` within buckets already looked up for ``principal`` (``get_bucket``,
        ``list_buckets``), instead of ``request.bucket_ids``."""
        return search(
            self.store,
            self.embedder,
            request,
            bucket_ids=[b.id for b in buckets],
            principal=principal,
            settings=self.settings.retrieve,
        )

    def backfill_vectors(self) -> int:
        """Embed chunks that have no vector from the current embedder (after switching models).

        Returns how many texts were embedded.
        """
        done = 0
        with self._backfill_lock:
            while batch := self.store.chunks_without_vectors(self.embedder.name, limit=256):
                texts = [chunk_text_for_embedding(c.text, c.heading_path) for _, c in batch]
                self.store.put_vectors(
                    self.embedder.name, [key for key, _ in batch], self._embed(texts)
                )
                done += len(batch)
        return done

    # internals -------------------------------------------------------------------------------
    def _within_ocr_budget(self, tenant_id: str, pages: int) -> None:
        limit = self.settings.ingest.max_tenant_ocr_pages
        waiting = self.store.ocr_backlog(tenant_id)
        if waiting + pages > limit:
            raise QuotaExceeded(
                f"The file needs OCR on {pages:,} pages, and {waiting:,} pages of this tenant are"
                f" waiting for OCR already; the limit is {limit:,} at once"
                " (CITEWELL_INGEST__MAX_TENANT_OCR_PAGES). Send it again once some are read."
            )

    def _held(self, bucket_id: str, digest: str, principal: Principal) -> Source | None:
        """The source with these bytes in the bucket that the caller sees, if any: one it
        cannot see is neither shown nor reused (the caller stores its own)."""
        held = self.store.find_sources(bucket_id, digest)
        return next((source for source in held if principal.can_see(source.acl)), None)

    def _reaches(self, bucket_id: str, principal: Principal) -> bool:
        """Whether the caller may reach a bucket: what it may not is answered as absent."""
        try:
            self.get_bucket(bucket_id, principal=principal)
        except NotFound:
            return False
        return True

    def _ingest_job(
        self, job: IngestJob, data: bytes, principal: Principal, progress: Progress
    ) -> IngestResult:
        return self.ingest(
            data,
            filename=job.filename,
            bucket=job.bucket_id,
            media_type=job.mime_type,
            effective_date=job.effective_date,
            acl=job.acl,
            metadata=job.metadata,
            principal=principal,
            progress=progress,
            source_id=job.source_id,
        )

    def _draft(
        self,
        data: bytes,
        digest: str,
        bucket: Bucket,
        filename: str,
        media_type: str | None,
        effective_date: dt.date | None,
        acl: frozenset[str],
        metadata: dict[str, MetadataValue],
        progress: Progress | None,
    ) -> SourceDraft:
        media_type = media_type or detect_media_type(data, filename)
        document = parse(
            data,
            filename=filename,
            limits=self.settings.ingest,
            media_type=media_type,
            ocr=self.ocr(progress),
        )
        sentences = sentence_spans(document.text, document.blocks)
        chunks = chunk_document(document, sentences, max_words=self.settings.ingest.chunk_max_words)
        texts = [
            chunk_text_for_embedding(document.text[c.span.start : c.span.end], c.heading_path)
            for c in chunks
        ]
        keys = [self._vector_key(text) for text in texts]
        return SourceDraft(
            bucket_id=bucket.id,
            filename=filename,
            mime_type=media_type,
            content=data,
            content_hash=digest,
            text=document.text,
            chunks=chunks,
            vectors=self._vectors(texts, keys),
            vector_keys=tuple(keys),
            embedder=self.embedder.name,
            pages=document.pages,
            char_boxes=document.char_boxes,
            char_confidences=document.char_confidences,
            title=document.title,
            language=detect_language(document.text),
            modality=document.modality,
            effective_date=effective_date,
            acl=frozenset(acl),
            metadata=metadata,
        )

    def _vector_key(self, text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    def _vectors(self, texts: Sequence[str], keys: Sequence[str]) -> Vectors:
        """Vectors for the texts, embedding only those the store has not seen before."""
        cached = self.store.cached_vectors(self.embedder.name, keys)
        missing = [i for i, key in enumerate(keys) if key not in cached]
        fresh = self._embed([texts[i] for i in missing])
        vectors = np.empty((len(texts), self.embedder.dim), dtype=np.float32)
        for row, i in enumerate(missing):
            vectors[i] = fresh[row]
        for i, key in enumerate(keys):
            if key in cached:
                vectors[i] = cached[key]
        return vectors

    def _embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.empty((0, self.embedder.dim), dtype=np.float32)
        parts = [
            self.embedder.embed_passages(texts[i : i + _EMBED_BATCH])
            for i in range(0, len(texts), _EMBED_BATCH)
        ]
        return np.concatenate(parts)


def copy_to_postgres(settings: Settings) -> dict[str, int]:
    """Copy the embedded store of ``settings.data_dir``, and the Files APIs' uploads, into the
    empty PostgreSQL database of ``settings.database_url``; returns the rows copied per table."""
    from citewell.store.postgres import PostgresStore  # the postgres extra: imported on use
    from citewell.store.postgres.migrate import copy_embedded

    embedder = open_embedder(settings)  # names the HNSW index; loads no model
    target = open_store(settings, embedder=embedder.name, dim=embedder.dim)
    try:
        if not isinstance(target, PostgresStore):
            raise ConfigError("citewell migrate copies into PostgreSQL: set a database URL")
        return copy_embedded(settings.data_dir, target, open_objects(settings, "files"))
    finally:
        target.close()
