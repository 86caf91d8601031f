"""The SQL both stores run, written once: buckets, sources as they are read and deleted, ingest
jobs, answers, traces, tenants, keys and agents.

The embedded store (SQLite) and the scale-out store (PostgreSQL) keep these records in tables of
the same names and columns, so each statement is written here once, with ``?`` placeholders. What
the two databases do differently is a ``Dialect``: the placeholder, how a value is kept (SQLite
keeps times, lists and JSON as text), text order, row locks and whose clock times a lease. Each
store keeps what is its own: connections, schemas, writing a source with its pages, chunks and
vectors, the lexical and vector indexes, and search.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, LiteralString, TypeVar

from citewell.errors import Conflict, NotFound, StoreError
from citewell.model import (
    Agent,
    Answer,
    ApiKey,
    Bucket,
    CharBoxes,
    CharConfidences,
    Chunk,
    IngestJob,
    JobState,
    Modality,
    Page,
    Permission,
    Source,
    Span,
    StoredAnswer,
    Tenant,
    Trace,
)
from citewell.store.base import (
    Retention,
    SourceDraft,
    StoredTrace,
    Vectors,
    chunk_id,
    job_interrupted,
    new_id,
    sources_quoted,
)
from citewell.store.dialect import Connection, Cursor, Dialect, Row
from citewell.store.encoding import pack_boxes, pack_confidences, unpack_boxes, unpack_confidences
from citewell.store.objects.blobs import BlobStore

__all__ = [
    "CHUNK_COLUMNS",
    "CHUNK_ROW_COLUMNS",
    "SqlStore",
    "chunk_rows",
    "page_rows",
    "store_errors",
]

C = TypeVar("C", bound=Connection)


class SqlStore(ABC, Generic[C]):
    """The part of a ``Store`` that is the same SQL on either database.

    A store provides its dialect, its transactions and reads, how many sources one statement
    reads (``get_sources``), and the removal of sources, whose derived rows and indexes are its
    own.
    """

    _dialect: Dialect
    _stored: LiteralString
    """True of a row ``s`` of ``sources`` once the source is stored: SQLite writes one in steps,
    and until the last it is pending, seen by no read."""
    blobs: BlobStore
    retention: Retention

    @abstractmethod
    def _write(self) -> AbstractContextManager[C]:
        """A connection in a transaction that commits when the block ends."""

    @abstractmethod
    def _read(self, query: LiteralString, params: Sequence[Any] = ()) -> Sequence[Any]:
        """The rows of one statement, in the driver's own placeholders."""

    @abstractmethod
    def _forget_derived(self, conn: C, source_keys: Sequence[int]) -> None:
        """Forget what the store keeps of sources outside the shared tables (its lexical
        index's part), in the transaction that deletes them, before their chunks go."""

    def _run(self, conn: C, query: LiteralString, params: Sequence[Any] = ()) -> Cursor:
        """Run one statement in a transaction."""
        return conn.execute(self._dialect.query(query), params)

    def _rows(self, query: LiteralString, params: Sequence[Any] = ()) -> Sequence[Row]:
        """The rows of one statement, read outside any transaction."""
        return self._read(self._dialect.query(query), params)

    # buckets ---------------------------------------------------------------------------------
    def create_bucket(self, slug: str, *, tenant_id: str, name: str | None = None) -> Bucket:
        with self._write() as conn:
            self._run(
                conn,
                "INSERT INTO buckets (id, tenant_id, slug, name, created_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (tenant_id, slug) DO NOTHING",
                (new_id("bkt"), tenant_id, slug, name or slug, self._dialect.time(_now())),
            )
        return self.get_bucket(slug, tenant_id=tenant_id)

    def get_bucket(self, id_or_slug: str, *, tenant_id: str) -> Bucket:
        rows = self._rows(
            "SELECT id, tenant_id, slug, name, created_at FROM buckets"
            " WHERE tenant_id = ? AND (id = ? OR slug = ?)",
            (tenant_id, id_or_slug, id_or_slug),
        )
        if not rows:
            raise NotFound(f"no bucket '{id_or_slug}'", param="bucket")
        return self._bucket(rows[0])

    def list_buckets(self, *, tenant_id: str) -> list[Bucket]:
        rows = self._rows(
            "SELECT id, tenant_id, slug, name, created_at FROM buckets WHERE tenant_id = ?"
            f" ORDER BY slug{self._dialect.binary}",
            (tenant_id,),
        )
        return [self._bucket(row) for row in rows]

    def rename_bucket(
        self, bucket_id: str, *, slug: str | None = None, name: str | None = None
    ) -> Bucket:
        with self._write() as conn:
            row = self._run(
                conn,
                "SELECT tenant_id, slug, name FROM buckets WHERE id = ?"
                + self._dialect.lock(" FOR UPDATE"),
                (bucket_id,),
            ).fetchone()
            if row is None:
                raise NotFound(f"no bucket '{bucket_id}'", param="bucket")
            taken = self._run(
                conn,
                "SELECT 1 FROM buckets WHERE tenant_id = ? AND slug = ? AND id != ?",
                (row["tenant_id"], slug, bucket_id),
            ).fetchone()
            if taken is not None:
                raise Conflict(f"a bucket with slug '{slug}' already exists", param="slug")
            self._run(
                conn,
                "UPDATE buckets SET slug = ?, name = ? WHERE id = ?",
                (slug or row["slug"], row["name"] if name is None else name, bucket_id),
            )
        return self.get_bucket(bucket_id, tenant_id=row["tenant_id"])

    def delete_bucket(self, bucket_id: str) -> None:
        with self._write() as conn:
            rows = self._run(
                conn,
                "SELECT s.key, s.content_hash FROM sources s JOIN buckets b ON b.key = s.bucket_key"
                " WHERE b.id = ?" + self._dialect.lock(" FOR UPDATE OF s"),
                (bucket_id,),
            ).fetchall()
            self._forget_sources(conn, [row["key"] for row in rows])
            if self._run(conn, "DELETE FROM buckets WHERE id = ?", (bucket_id,)).rowcount == 0:
                raise NotFound(f"no bucket '{bucket_id}'", param="bucket")
        self._after_removal({row["content_hash"] for row in rows})

    def _bucket(self, row: Row) -> Bucket:
        return Bucket(
            id=row["id"],
            tenant_id=row["tenant_id"],
            slug=row["slug"],
            name=row["name"],
            created_at=self._dialect.read_time(row["created_at"]),
        )

    # sources ---------------------------------------------------------------------------------
    def find_sources(self, bucket_id: str, content_hash: str) -> list[Source]:
        return self._select_sources(
            "b.id = ? AND s.content_hash = ? ORDER BY s.created_at, s.id", (bucket_id, content_hash)
        )

    def get_source(self, source_id: str) -> Source:
        source = self.get_sources([source_id]).get(source_id)
        if source is None:
            raise NotFound(f"no source '{source_id}'", param="source_id")
        return source

    def list_sources(self, bucket_id: str, *, include_superseded: bool = False) -> list[Source]:
        current = "" if include_superseded else " AND s.superseded_by IS NULL"
        return self._select_sources(
            f"b.id = ?{current} ORDER BY s.filename{self._dialect.binary}, s.version", (bucket_id,)
        )

    def delete_source(self, source_id: str) -> None:
        with self._write() as conn:
            row = self._run(
                conn,
                "SELECT s.key, s.content_hash, s.supersedes, s.superseded_by FROM sources s"
                f" WHERE s.id = ? AND {self._stored}" + self._dialect.lock(" FOR UPDATE"),
                (source_id,),
            ).fetchone()
            if row is None:
                raise NotFound(f"no source '{source_id}'", param="source_id")
            # Close the gap in the version chain; deleting the newest makes the previous current.
            self._run(
                conn,
                "UPDATE sources SET superseded_by = ? WHERE id = ?",
                (row["superseded_by"], row["supersedes"]),
            )
            self._run(
                conn,
                "UPDATE sources SET supersedes = ? WHERE id = ?",
                (row["supersedes"], row["superseded_by"]),
            )
            self._forget_sources(conn, [row["key"]])
        self._after_removal({row["content_hash"]})

    def source_text(self, source_id: str) -> str:
        rows = self._rows(
            f"SELECT s.text FROM sources s WHERE s.id = ? AND {self._stored}", (source_id,)
        )
        if not rows:
            raise NotFound(f"no source '{source_id}'", param="source_id")
        return str(rows[0]["text"])

    def char_boxes(self, source_id: str, page_number: int) -> CharBoxes:
        return unpack_boxes(self._page_column("boxes", source_id, page_number))

    def char_confidences(self, source_id: str, page_number: int) -> CharConfidences:
        return unpack_confidences(self._page_column("confidences", source_id, page_number))

    def source_pages(self, source_id: str) -> tuple[Page, ...]:
        rows = self._rows(
            "SELECT p.number, p.label, p.start_offset, p.end_offset, p.width, p.height,"
            " p.modality, p.ocr_confidence FROM pages p JOIN sources s ON s.key = p.source_key"
            " WHERE s.id = ? ORDER BY p.number",
            (source_id,),
        )
        return tuple(
            Page(
                number=row["number"],
                label=row["label"],
                span=Span(start=row["start_offset"], end=row["end_offset"]),
                width=row["width"],
                height=row["height"],
                modality=Modality(row["modality"]),
                ocr_confidence=row["ocr_confidence"],
            )
            for row in rows
        )

    def get_chunks(self, chunk_ids: Sequence[str]) -> dict[str, Chunk]:
        rows = self._rows(
            f"SELECT {CHUNK_COLUMNS} FROM chunks c JOIN sources s ON s.key = c.source_key"
            f" WHERE c.id IN (SELECT value FROM {self._dialect.each})",
            (self._dialect.labels(chunk_ids),),
        )
        return {row["id"]: self._chunk(row) for row in rows}

    def _chunk(self, row: Row) -> Chunk:
        """A chunk from a row that holds ``CHUNK_COLUMNS``."""
        read = self._dialect.read_json_value
        return Chunk(
            id=row["id"],
            source_id=row["source_id"],
            index=row["idx"],
            span=Span(start=row["start_offset"], end=row["end_offset"]),
            text=row["text"],
            heading_path=tuple(read(row["heading_path"])),
            page_numbers=tuple(read(row["page_numbers"])),
            sentences=tuple(Span(start=a, end=b) for a, b in read(row["sentences"])),
            language=row["language"],
        )

    def _insert_source(
        self, conn: C, source_id: str, draft: SourceDraft, *own: tuple[LiteralString, Any]
    ) -> int:
        """Insert a new source's row (version 0 until ``_link_version``), with the store's
        ``own`` columns and their values, and return its key. Raises ``NotFound`` for no such
        bucket, ``Conflict`` when the bucket holds these bytes under the same labels."""
        values = (*self._source_row(conn, source_id, draft), *(value for _, value in own))
        columns = ", ".join([_SOURCE_ROW_COLUMNS, *(name for name, _ in own)])
        marks = ", ".join("?" * len(values))
        query = f"INSERT INTO sources ({columns}) VALUES ({marks}) RETURNING key"
        row = self._run(conn, query, values).fetchone()
        assert row is not None
        key: int = row["key"]
        return key

    def _source_row(self, conn: C, source_id: str, draft: SourceDraft) -> tuple[Any, ...]:
        """The values of ``_SOURCE_ROW_COLUMNS`` for a new source."""
        bucket = self._run(conn, "SELECT key FROM buckets WHERE id = ?", (draft.bucket_id,))
        found = bucket.fetchone()
        if found is None:
            raise NotFound(f"no bucket '{draft.bucket_id}'", param="bucket")
        acl = self._dialect.labels(draft.acl)
        duplicate = self._run(
            conn,
            "SELECT id FROM sources WHERE bucket_key = ? AND content_hash = ? AND acl = ?",
            (found["key"], draft.content_hash, acl),
        ).fetchone()
        if duplicate is not None:
            raise Conflict(f"the bucket already holds these bytes as source {duplicate['id']}")
        day = draft.effective_date
        return (
            source_id,
            found["key"],
            draft.filename,
            draft.mime_type,
            draft.content_hash,
            len(draft.content),
            0,
            draft.title,
            draft.language,
            draft.modality.value,
            len(draft.pages) or None,
            len(draft.text),
            len(draft.chunks),
            None if day is None else self._dialect.day(day),
            acl,
            self._dialect.json_value(draft.metadata),
            self._dialect.time(_now()),
            draft.text,
        )

    def _link_version(self, conn: C, source_key: int, draft: SourceDraft) -> None:
        """Make a new source the current version of its filename, as its writer sees it: it
        supersedes the newest current one the writer can see."""
        current = self._run(
            conn,
            "SELECT s.key, s.id, s.version, s.acl FROM sources s WHERE s.bucket_key ="
            f" (SELECT bucket_key FROM sources WHERE key = ?) AND s.filename = ? AND {self._stored}"
            " AND s.superseded_by IS NULL AND s.key != ? ORDER BY s.key DESC"
            + self._dialect.lock(" FOR UPDATE"),
            (source_key, draft.filename, source_key),
        ).fetchall()
        labels = self._dialect.read_labels
        previous = next(
            (r for r in current if draft.writer.can_see(frozenset(labels(r["acl"])))), None
        )
        self._run(
            conn,
            "UPDATE sources SET version = ?, supersedes = ? WHERE key = ?",
            (
                previous["version"] + 1 if previous else 1,
                previous["id"] if previous else None,
                source_key,
            ),
        )
        if previous is not None:
            self._run(
                conn,
                "UPDATE sources SET superseded_by = (SELECT id FROM sources WHERE key = ?)"
                " WHERE key = ?",
                (source_key, previous["key"]),
            )

    def _labels(self, value: Any) -> frozenset[str]:
        return frozenset(self._dialect.read_labels(value))

    def get_sources(self, source_ids: Iterable[str]) -> dict[str, Source]:
        sources = self._select_sources(
            f"s.id IN (SELECT value FROM {self._dialect.each})",
            (self._dialect.labels(set(source_ids)),),
        )
        return {source.id: source for source in sources}

    def _forget_sources(self, conn: C, source_keys: Sequence[int]) -> None:
        """Delete sources with what is derived from them and the answers quoting them, and the
        vectors no chunk holds any more."""
        if not source_keys:
            return
        keys = (self._dialect.keys(source_keys),)
        listed: LiteralString = f"(SELECT value FROM {self._dialect.each_key})"
        vector_keys = [
            row["vector_key"]
            for row in self._run(
                conn, f"SELECT DISTINCT vector_key FROM chunks WHERE source_key IN {listed}", keys
            ).fetchall()
        ]
        self._forget_derived(conn, source_keys)
        self._run(
            conn,
            "DELETE FROM answers WHERE id IN (SELECT a.response_id FROM answer_sources a"
            f" JOIN sources s ON s.id = a.source_id WHERE s.key IN {listed})",
            keys,
        )
        self._run(conn, f"DELETE FROM sources WHERE key IN {listed}", keys)
        self._run(
            conn,
            f"DELETE FROM vectors WHERE vector_key IN (SELECT value FROM {self._dialect.each})"
            " AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.vector_key = vectors.vector_key)",
            (self._dialect.labels(vector_keys),),
        )

    # vectors ---------------------------------------------------------------------------------
    def cached_vectors(self, embedder: str, keys: Sequence[str]) -> dict[str, Vectors]:
        rows = self._rows(
            "SELECT vector_key, vector FROM vectors WHERE embedder = ?"
            f" AND vector_key IN (SELECT value FROM {self._dialect.each})",
            (embedder, self._dialect.labels(set(keys))),
        )
        return {row["vector_key"]: self._dialect.read_vector(row["vector"]) for row in rows}

    def chunks_without_vectors(self, embedder: str, *, limit: int) -> list[tuple[str, Chunk]]:
        """Up to ``limit`` stored chunks whose text has no vector from ``embedder``, one chunk
        per text (the first)."""
        rows = self._rows(
            f"SELECT c.vector_key, {CHUNK_COLUMNS} FROM chunks c"
            f" JOIN sources s ON s.key = c.source_key WHERE {self._stored}"
            " AND NOT EXISTS (SELECT 1 FROM vectors v"
            " WHERE v.embedder = ? AND v.vector_key = c.vector_key)"
            " AND NOT EXISTS (SELECT 1 FROM chunks e"
            " WHERE e.vector_key = c.vector_key AND e.key < c.key)"
            " ORDER BY c.key LIMIT ?",
            (embedder, limit),
        )
        return [(row["vector_key"], self._chunk(row)) for row in rows]

    def original(self, source_id: str) -> bytes:
        return self.blobs.get(self.get_source(source_id).content_hash)

    def _page_column(self, column: LiteralString, source_id: str, page_number: int) -> Any:
        """One stored column of a page (``column`` is ours, never the caller's)."""
        rows = self._rows(
            f"SELECT p.{column} FROM pages p JOIN sources s ON s.key = p.source_key"
            " WHERE s.id = ? AND p.number = ?",
            (source_id, page_number),
        )
        if not rows:
            raise NotFound(f"no page {page_number} in source '{source_id}'", param="page")
        return rows[0][column]

    def _select_sources(self, where: LiteralString, params: Sequence[Any]) -> list[Source]:
        """The stored sources a statement selects: ``where`` is its rest after WHERE (its
        conditions on ``sources s`` and ``buckets b``, then any ORDER BY)."""
        rows = self._rows(
            f"SELECT {_SOURCE_COLUMNS} FROM sources s JOIN buckets b ON b.key = s.bucket_key"
            f" WHERE {self._stored} AND {where}",
            params,
        )
        return [self._source(row) for row in rows]

    def _source(self, row: Row) -> Source:
        day = row["effective_date"]
        return Source(
            id=row["id"],
            bucket_id=row["bucket_id"],
            filename=row["filename"],
            mime_type=row["mime_type"],
            content_hash=row["content_hash"],
            byte_size=row["byte_size"],
            version=row["version"],
            supersedes=row["supersedes"],
            superseded_by=row["superseded_by"],
            title=row["title"],
            language=row["language"],
            modality=Modality(row["modality"]),
            page_count=row["page_count"],
            char_count=row["char_count"],
            chunk_count=row["chunk_count"],
            effective_date=None if day is None else self._dialect.read_day(day),
            acl=frozenset(self._dialect.read_labels(row["acl"])),
            metadata=self._dialect.read_json_value(row["metadata"]),
            created_at=self._dialect.read_time(row["created_at"]),
        )

    def _after_removal(self, content_hashes: set[str]) -> None:
        """Finish a removal after its transaction: delete the originals no source, nor job under
        way, holds any more."""
        for digest in content_hashes:
            if not self._rows(_HELD, (digest, digest)):
                self.blobs.delete(digest)

    # ingest jobs -----------------------------------------------------------------------------
    def add_job(self, job: IngestJob, content: bytes, *, owner: str, lease_seconds: float) -> None:
        self.blobs.put(content, job.content_hash)
        moment = _now()
        now, until = self._dialect.now(moment), self._dialect.later(moment, lease_seconds)
        with self._write() as conn:
            self._run(
                conn,
                f"INSERT INTO ingest_jobs ({_JOB_COLUMNS}, lease_owner, lease_expires, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, false, ?, ?, ?,"
                f" {until.sql}, {now.sql})",
                (
                    job.source_id,
                    job.tenant_id,
                    job.bucket_id,
                    job.filename,
                    job.mime_type,
                    job.content_hash,
                    job.byte_size,
                    self._dialect.labels(job.acl),
                    self._dialect.json_value(job.metadata),
                    None if job.effective_date is None else self._dialect.day(job.effective_date),
                    JobState.RUNNING.value,
                    job.attempts,
                    job.pages_done,
                    job.pages_total,
                    self._dialect.stamp(job.created_at),
                    None
                    if job.submitter_labels is None
                    else self._dialect.labels(job.submitter_labels),
                    owner,
                    *until.params,
                    *now.params,
                ),
            )
        # Again: a failed job elsewhere may have taken the shared bytes away meanwhile.
        self.blobs.put(content, job.content_hash)

    def get_job(self, job_id: str) -> IngestJob:
        rows = self._rows(f"SELECT {_JOB_COLUMNS} FROM ingest_jobs WHERE id = ?", (job_id,))
        if not rows:
            raise NotFound(f"no source '{job_id}'", param="source_id")
        return self._job(rows[0])

    def list_jobs(self, bucket_id: str) -> list[IngestJob]:
        rows = self._rows(
            f"SELECT {_JOB_COLUMNS} FROM ingest_jobs WHERE bucket_id = ? ORDER BY created_at, id",
            (bucket_id,),
        )
        return [self._job(row) for row in rows]

    def find_jobs(self, bucket_id: str, content_hash: str) -> list[IngestJob]:
        rows = self._rows(
            f"SELECT {_JOB_COLUMNS} FROM ingest_jobs WHERE bucket_id = ? AND content_hash = ?"
            " AND state IN ('queued', 'running') ORDER BY created_at, id",
            (bucket_id, content_hash),
        )
        return [self._job(row) for row in rows]

    def job_content(self, job_id: str) -> bytes:
        return self.blobs.get(self.get_job(job_id).content_hash)

    def claim_job(self, *, owner: str, lease_seconds: float, max_attempts: int) -> IngestJob | None:
        moment = _now()
        now, until = self._dialect.now(moment), self._dialect.later(moment, lease_seconds)
        takeable = f"(state = 'queued' OR (state = 'running' AND lease_expires < {now.sql}))"
        with self._write() as conn:
            exhausted = self._run(
                conn,
                "UPDATE ingest_jobs SET state = 'failed', error = ?, lease_owner = NULL,"
                f" lease_expires = NULL, updated_at = {now.sql} WHERE {takeable}"
                " AND attempts >= ? RETURNING content_hash",
                (job_interrupted(max_attempts), *now.params, *now.params, max_attempts),
            ).fetchall()
            # One claimer at a time: SQLite's transactions take turns; on PostgreSQL, SKIP
            # LOCKED: concurrent claimers each lock a different job, and a job another claims
            # meanwhile is looked at again (it is running, with a lease: not takeable).
            row = self._run(
                conn,
                "UPDATE ingest_jobs SET state = 'running', attempts = attempts + 1,"
                f" lease_owner = ?, lease_expires = {until.sql}, updated_at = {now.sql}"
                f" WHERE id = (SELECT id FROM ingest_jobs WHERE {takeable} ORDER BY created_at"
                f" LIMIT 1{self._dialect.lock(' FOR UPDATE SKIP LOCKED')})"
                f" RETURNING {_JOB_COLUMNS}",
                (owner, *until.params, *now.params, *now.params),
            ).fetchone()
        self._after_removal({r["content_hash"] for r in exhausted})
        return None if row is None else self._job(row)

    def renew_jobs(self, *, owner: str, lease_seconds: float) -> None:
        until = self._dialect.later(_now(), lease_seconds)
        with self._write() as conn:
            self._run(
                conn,
                f"UPDATE ingest_jobs SET lease_expires = {until.sql} WHERE lease_owner = ?"
                " AND state = 'running'",
                (*until.params, owner),
            )

    def job_progress(self, job_id: str, *, owner: str, done: int, total: int) -> bool:
        now = self._dialect.now(_now())
        with self._write() as conn:
            updated = self._run(
                conn,
                f"UPDATE ingest_jobs SET pages_done = ?, pages_total = ?, updated_at = {now.sql}"
                " WHERE id = ? AND lease_owner = ? AND state = 'running'",
                (done, total, *now.params, job_id, owner),
            ).rowcount
        return bool(updated)

    def ocr_backlog(self, tenant_id: str) -> int:
        rows = self._rows(
            "SELECT COALESCE(SUM(pages_total - pages_done), 0) AS pages FROM ingest_jobs"
            " WHERE tenant_id = ? AND state IN ('queued', 'running')",
            (tenant_id,),
        )
        return int(rows[0]["pages"])

    def finish_job(
        self,
        job_id: str,
        *,
        owner: str,
        result_id: str | None = None,
        error: str | None = None,
        unreadable: bool = False,
    ) -> bool:
        state = JobState.DONE if error is None else JobState.FAILED
        now = self._dialect.now(_now())
        with self._write() as conn:
            row = self._run(
                conn,
                "UPDATE ingest_jobs SET state = ?, result_id = ?, error = ?, unreadable = ?,"
                f" lease_owner = NULL, lease_expires = NULL, updated_at = {now.sql}"
                " WHERE id = ? AND lease_owner = ? AND state = 'running' RETURNING content_hash",
                (state.value, result_id, error, unreadable, *now.params, job_id, owner),
            ).fetchone()
            self._run(conn, _FORGET_OLD_JOBS, (KEPT_FINISHED,))
        if row is not None and error is not None:
            self._after_removal({row["content_hash"]})
        return row is not None

    def release_jobs(self, *, owner: str) -> None:
        with self._write() as conn:
            self._run(
                conn,
                "UPDATE ingest_jobs SET state = 'queued', attempts = attempts - 1,"
                " lease_owner = NULL, lease_expires = NULL WHERE lease_owner = ?"
                " AND state = 'running'",
                (owner,),
            )

    def delete_job(self, job_id: str) -> None:
        with self._write() as conn:
            row = self._run(
                conn, "DELETE FROM ingest_jobs WHERE id = ? RETURNING content_hash", (job_id,)
            ).fetchone()
        if row is None:
            raise NotFound(f"no source '{job_id}'", param="source_id")
        self._after_removal({row["content_hash"]})

    def _job(self, row: Row) -> IngestJob:
        day = row["effective_date"]
        return IngestJob(
            source_id=row["id"],
            tenant_id=row["tenant_id"],
            bucket_id=row["bucket_id"],
            filename=row["filename"],
            mime_type=row["mime_type"],
            content_hash=row["content_hash"],
            byte_size=row["byte_size"],
            acl=frozenset(self._dialect.read_labels(row["acl"])),
            metadata=self._dialect.read_json_value(row["metadata"]),
            effective_date=None if day is None else self._dialect.read_day(day),
            created_at=self._dialect.read_stamp(row["created_at"]),
            state=JobState(row["state"]),
            attempts=row["attempts"],
            pages_done=row["pages_done"],
            pages_total=row["pages_total"],
            result_id=row["result_id"],
            error=row["error"],
            unreadable=bool(row["unreadable"]),
            submitter_labels=None
            if row["submitter_labels"] is None
            else frozenset(self._dialect.read_labels(row["submitter_labels"])),
        )

    # answers ---------------------------------------------------------------------------------
    def put_answer(self, stored: StoredAnswer) -> None:
        self._purge_answers()
        if self.retention.answers == 0:
            return
        with self._write() as conn:
            if (
                stored.previous_id is not None
                and not self._run(
                    conn,
                    "SELECT 1 FROM answers WHERE id = ?" + self._dialect.lock(" FOR SHARE"),
                    (stored.previous_id,),
                ).fetchone()
            ):
                # The answer it continues was deleted with a source while this one was made:
                # its conversation quotes that source's text.
                return
            self._run(
                conn,
                "INSERT INTO answers (id, tenant_id, answer_id, created_at, answer, conversation,"
                " rendered, previous_id, key_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    stored.id,
                    stored.tenant_id,
                    stored.answer.id,
                    self._dialect.time(_now()),
                    stored.answer.model_dump_json(),
                    self._dialect.json_value([list(turn) for turn in stored.conversation]),
                    stored.rendered,
                    stored.previous_id,
                    stored.key_id,
                ),
            )
            self._run(
                conn,
                "INSERT INTO answer_sources (source_id, response_id)"
                f" SELECT value, ? FROM {self._dialect.each}"
                " UNION SELECT source_id, ? FROM answer_sources WHERE response_id = ?",
                (
                    stored.id,
                    self._dialect.labels(sources_quoted(stored.answer)),
                    stored.id,
                    stored.previous_id,
                ),
            )

    def get_answer(self, answer_id: str, *, tenant_id: str) -> StoredAnswer:
        rows = self._rows(
            "SELECT id, tenant_id, answer, conversation, rendered, previous_id, key_id"
            " FROM answers WHERE id = ? AND tenant_id = ?",
            (answer_id, tenant_id),
        )
        if not rows:
            raise NotFound(f"No response found with id '{answer_id}'.", param="response_id")
        row = rows[0]
        return StoredAnswer(
            id=row["id"],
            tenant_id=row["tenant_id"],
            answer=Answer.model_validate_json(row["answer"]),
            rendered=row["rendered"],
            conversation=tuple(
                (role, text) for role, text in self._dialect.read_json_value(row["conversation"])
            ),
            previous_id=row["previous_id"],
            key_id=row["key_id"],
        )

    def _purge_answers(self) -> None:
        """Drop the stored answers older than the retention (with what they quote)."""
        cutoff = _now() - timedelta(days=self.retention.answers)
        with self._write() as conn:
            self._run(
                conn, "DELETE FROM answers WHERE created_at < ?", (self._dialect.time(cutoff),)
            )

    # traces ----------------------------------------------------------------------------------
    def put_trace(self, stored: StoredTrace) -> None:
        if stored.created_at.tzinfo is None:
            raise ValueError("a trace's time must be timezone-aware")
        with self._write() as conn:
            if self.retention.traces > 0:
                self._run(
                    conn,
                    "INSERT INTO traces (answer_id, agent, created_at, trace) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (answer_id) DO UPDATE SET agent = excluded.agent,"
                    " created_at = excluded.created_at, trace = excluded.trace",
                    (
                        stored.answer_id,
                        stored.agent,
                        self._dialect.stamp(stored.created_at),
                        stored.trace.model_dump_json(),
                    ),
                )
            self._drop_old_traces(conn)

    def list_traces(self) -> list[StoredTrace]:
        rows = self._rows(
            "SELECT answer_id, agent, created_at, trace FROM traces"
            f" ORDER BY created_at, answer_id{self._dialect.binary}"
        )
        return [
            StoredTrace(
                answer_id=row["answer_id"],
                agent=row["agent"],
                created_at=self._dialect.read_stamp(row["created_at"]),
                trace=Trace.model_validate_json(row["trace"]),
            )
            for row in rows
        ]

    def _purge_traces(self) -> None:
        """Drop the traces older than the retention (all of them for 0 days)."""
        with self._write() as conn:
            self._drop_old_traces(conn)

    def _drop_old_traces(self, conn: C) -> None:
        cutoff = _now() - timedelta(days=self.retention.traces)
        self._run(conn, "DELETE FROM traces WHERE created_at < ?", (self._dialect.stamp(cutoff),))

    # tenants and keys ------------------------------------------------------------------------
    def create_tenant(self, name: str) -> Tenant:
        tenant = Tenant(id=new_id("ten"), name=name, created_at=_now())
        with self._write() as conn:
            self._run(
                conn,
                "INSERT INTO tenants (id, name, created_at) VALUES (?, ?, ?)",
                (tenant.id, tenant.name, self._dialect.time(tenant.created_at)),
            )
        return tenant

    def get_tenant(self, tenant_id: str) -> Tenant:
        rows = self._rows("SELECT id, name, created_at FROM tenants WHERE id = ?", (tenant_id,))
        if not rows:
            raise NotFound(f"No tenant found with id '{tenant_id}'.", param="tenant_id")
        return self._tenant(rows[0])

    def list_tenants(self) -> list[Tenant]:
        rows = self._rows(
            "SELECT id, name, created_at FROM tenants"
            f" ORDER BY id != 'default', created_at, id{self._dialect.binary}"
        )
        return [self._tenant(row) for row in rows]

    def put_key(self, key: ApiKey, secret_hash: str) -> None:
        self.get_tenant(key.tenant_id)
        with self._write() as conn:
            self._run(
                conn,
                "INSERT INTO api_keys (id, tenant_id, name, secret_hash, permissions, bucket_ids,"
                " acl_labels, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key.id,
                    key.tenant_id,
                    key.name,
                    secret_hash,
                    self._dialect.labels(key.permissions),
                    None if key.bucket_ids is None else self._dialect.labels(key.bucket_ids),
                    None if key.acl_labels is None else self._dialect.labels(key.acl_labels),
                    self._dialect.time(key.created_at),
                ),
            )

    def get_key(self, key_id: str) -> tuple[ApiKey, str]:
        rows = self._rows(
            f"SELECT {_KEY_COLUMNS}, secret_hash FROM api_keys WHERE id = ?", (key_id,)
        )
        if not rows:
            raise NotFound(f"No API key found with id '{key_id}'.", param="key_id")
        return self._api_key(rows[0]), rows[0]["secret_hash"]

    def list_keys(self, tenant_id: str) -> list[ApiKey]:
        rows = self._rows(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE tenant_id = ?"
            f" ORDER BY created_at, id{self._dialect.binary}",
            (tenant_id,),
        )
        return [self._api_key(row) for row in rows]

    def revoke_key(self, key_id: str, *, tenant_id: str) -> ApiKey:
        with self._write() as conn:
            self._run(
                conn,
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND tenant_id = ?"
                " AND revoked_at IS NULL",
                (self._dialect.time(_now()), key_id, tenant_id),
            )
        key, _ = self.get_key(key_id)
        if key.tenant_id != tenant_id:
            raise NotFound(f"No API key found with id '{key_id}'.", param="key_id")
        return key

    def _tenant(self, row: Row) -> Tenant:
        return Tenant(
            id=row["id"], name=row["name"], created_at=self._dialect.read_time(row["created_at"])
        )

    def _api_key(self, row: Row) -> ApiKey:
        def a_set(column: str) -> frozenset[str] | None:
            value = row[column]
            return None if value is None else frozenset(self._dialect.read_labels(value))

        revoked = row["revoked_at"]
        return ApiKey(
            id=row["id"],
            tenant_id=row["tenant_id"],
            name=row["name"],
            permissions=frozenset(
                Permission(p) for p in self._dialect.read_labels(row["permissions"])
            ),
            bucket_ids=a_set("bucket_ids"),
            acl_labels=a_set("acl_labels"),
            created_at=self._dialect.read_time(row["created_at"]),
            revoked_at=None if revoked is None else self._dialect.read_time(revoked),
        )

    # agents ----------------------------------------------------------------------------------
    def put_agent(self, agent: Agent, *, tenant_id: str) -> None:
        self.get_tenant(tenant_id)
        with self._write() as conn:
            self._run(
                conn,
                "INSERT INTO agents (tenant_id, name, agent, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (tenant_id, name) DO UPDATE SET agent = excluded.agent",
                (tenant_id, agent.name, _agent_json(agent), self._dialect.time(_now())),
            )

    def list_agents(self, *, tenant_id: str) -> list[Agent]:
        rows = self._rows(
            "SELECT agent FROM agents WHERE tenant_id = ?"
            f" ORDER BY created_at, name{self._dialect.binary}",
            (tenant_id,),
        )
        return [Agent.model_validate_json(row["agent"]) for row in rows]

    def delete_agent(self, name: str, *, tenant_id: str) -> None:
        with self._write() as conn:
            deleted = self._run(
                conn, "DELETE FROM agents WHERE tenant_id = ? AND name = ?", (tenant_id, name)
            ).rowcount
        if not deleted:
            raise NotFound(f"No agent named '{name}'.", param="name")


_KEY_COLUMNS = "id, tenant_id, name, permissions, bucket_ids, acl_labels, created_at, revoked_at"

_SOURCE_ROW_COLUMNS: LiteralString = (
    "id, bucket_key, filename, mime_type, content_hash, byte_size, version, title, language,"
    " modality, page_count, char_count, chunk_count, effective_date, acl, metadata, created_at,"
    " text"
)
"""The columns of ``SqlStore._source_row``, in order."""
CHUNK_ROW_COLUMNS: LiteralString = (
    "id, source_key, idx, start_offset, end_offset, heading_path, page_numbers, sentences,"
    " language, vector_key"
)
"""The columns of ``chunk_rows``, in order."""
CHUNK_COLUMNS = (
    "c.id, s.id AS source_id, c.idx, c.start_offset, c.end_offset, c.heading_path,"
    " c.page_numbers, c.sentences, c.language,"
    " substr(s.text, c.start_offset + 1, c.end_offset - c.start_offset) AS text"
)
"""A chunk's columns, its text cut from its source's (``c`` chunks, ``s`` sources)."""
_SOURCE_COLUMNS = (
    "s.id, b.id AS bucket_id, s.filename, s.mime_type, s.content_hash, s.byte_size, s.version,"
    " s.supersedes, s.superseded_by, s.title, s.language, s.modality, s.page_count,"
    " s.char_count, s.chunk_count, s.effective_date, s.acl, s.metadata, s.created_at"
)
_JOB_COLUMNS = (
    "id, tenant_id, bucket_id, filename, mime_type, content_hash, byte_size, acl, metadata,"
    " effective_date, state, attempts, pages_done, pages_total, result_id, error, unreadable,"
    " created_at, submitter_labels"
)
KEPT_FINISHED = 256
"""Ended jobs kept (the newest), so that a client polling a source learns how its ingest ended."""
_FORGET_OLD_JOBS = (
    "DELETE FROM ingest_jobs WHERE state IN ('done', 'failed') AND id NOT IN (SELECT id FROM"
    " ingest_jobs WHERE state IN ('done', 'failed') ORDER BY updated_at DESC LIMIT ?)"
)
_HELD = (
    "SELECT 1 FROM sources WHERE content_hash = ? UNION ALL SELECT 1 FROM ingest_jobs"
    " WHERE content_hash = ? AND state IN ('queued', 'running') LIMIT 1"
)
"""Whether a source, or a job under way, holds an original (which is then kept)."""


@contextmanager
def store_errors(
    database: str, conflict: type[Exception], failure: type[Exception]
) -> Iterator[None]:
    """Where a database driver's exceptions become citewell's: ``conflict`` (an integrity
    error) a ``Conflict``, any other ``failure`` a ``StoreError``."""
    try:
        yield
    except conflict as exc:
        raise Conflict(f"the store refused a conflicting write: {exc}") from exc
    except failure as exc:
        raise StoreError(f"the {database} store failed: {exc}") from exc


def page_rows(source_key: int, draft: SourceDraft) -> Iterator[tuple[Any, ...]]:
    """The rows of a draft's pages, in the columns of both stores' ``pages`` table."""
    confidences = draft.char_confidences or [None] * len(draft.pages)
    for page, boxes, read in zip(draft.pages, draft.char_boxes, confidences, strict=True):
        yield (
            source_key,
            page.number,
            page.label,
            page.span.start,
            page.span.end,
            page.width,
            page.height,
            page.modality.value,
            pack_boxes(boxes),
            page.ocr_confidence,
            pack_confidences(read),
        )


def chunk_rows(
    source_id: str, source_key: int, draft: SourceDraft, dialect: Dialect
) -> Iterator[tuple[Any, ...]]:
    """The rows of a draft's chunks, in the columns both stores' ``chunks`` tables share
    (``CHUNK_ROW_COLUMNS``)."""
    for index, (chunk, key) in enumerate(zip(draft.chunks, draft.vector_keys, strict=True)):
        yield (
            chunk_id(source_id, index),
            source_key,
            index,
            chunk.span.start,
            chunk.span.end,
            dialect.json_value(list(chunk.heading_path)),
            dialect.json_value(list(chunk.page_numbers)),
            dialect.json_value([[s.start, s.end] for s in chunk.sentences]),
            chunk.language,
            key,
        )


def _now() -> datetime:
    return datetime.now(UTC)


def _agent_json(agent: Agent) -> str:
    """What the agent's owner set, and nothing it left to the defaults: a default that changes
    (a threshold chosen again with the reader's card) reaches the agents that never chose."""
    return agent.model_dump_json(exclude_unset=True)
