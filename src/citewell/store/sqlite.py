"""The embedded store: SQLite (WAL) for sources and chunks, tantivy for BM25, numpy for vectors.

SQLite is the source of truth. The lexical and vector indexes are derived from it and only ever
answer *within* the set of source keys SQLite says the scope may see, so a stale index entry can
never surface a deleted or foreign passage.

Ingest is atomic per source, in three steps: (1) one transaction writes the source with all its
pages, chunks and vectors as ``pending`` (invisible); (2) its chunks go into the lexical index;
(3) one transaction flips it to ``ready`` and links versions. A crash before (3) leaves a pending
row, which the next open removes, together with any lexical documents it left behind.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from citewell.errors import Conflict, NotFound, StoreError
from citewell.ingest.base import CharBoxes, CharConfidences
from citewell.ingest.jobs import KEPT_FINISHED, IngestJob, JobState
from citewell.model import (
    Agent,
    Answer,
    ApiKey,
    Bucket,
    Chunk,
    Modality,
    Page,
    Permission,
    Source,
    SourceStatus,
    Span,
    Tenant,
    Trace,
)
from citewell.store.base import (
    ChunkHit,
    FusedHit,
    Fusion,
    Scope,
    SourceDraft,
    StoredAnswer,
    StoredTrace,
    Vectors,
    chunk_id,
    job_interrupted,
    job_under_way,
    new_id,
    new_source_id,
    sources_quoted,
)
from citewell.store.blobs import BlobStore
from citewell.store.encoding import pack_boxes, pack_confidences, unpack_boxes, unpack_confidences
from citewell.store.filters import SqlParam, compile_filter
from citewell.store.fusion import fuse
from citewell.store.lexical import LexicalDoc, LexicalIndex
from citewell.store.objects import FolderObjects
from citewell.store.schema import migrate
from citewell.store.vectors import VectorIndex

__all__ = ["SQLiteStore"]

_PENDING = "pending"
_ALLOWED_CACHE_SIZE = 256
"""Scopes whose visible sources are remembered (until the next write)."""
_SOURCE_COLUMNS = (
    "s.id, b.id AS bucket_id, s.filename, s.mime_type, s.content_hash, s.byte_size, s.version, "
    "s.supersedes, s.superseded_by, s.status, s.title, s.language, s.modality, s.page_count, "
    "s.char_count, s.chunk_count, s.effective_date, s.acl, s.metadata, s.created_at"
)
_CHUNK_COLUMNS = (
    "c.id, s.id AS source_id, c.idx, c.start, c.end, c.heading_path, c.page_numbers, "
    "c.sentences, c.language, substr(s.text, c.start + 1, c.end - c.start) AS text"
)


def _now() -> str:
    return datetime.now(UTC).isoformat()


_UTC_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
"""Fixed-width UTC timestamps, so that text order is time order."""


def _utc_text(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("a trace's time must be timezone-aware")
    return moment.astimezone(UTC).strftime(_UTC_FORMAT)


@contextmanager
def _store_errors() -> Iterator[None]:
    """The one place where sqlite3's exceptions become citewell's."""
    try:
        yield
    except sqlite3.IntegrityError as exc:
        raise Conflict(f"the store refused a conflicting write: {exc}") from exc
    except sqlite3.Error as exc:
        raise StoreError(f"the SQLite store failed: {exc}") from exc


class SQLiteStore:
    """A Store in one folder: ``citewell.db``, ``lexical/`` and (unless ``blobs`` is given)
    ``blobs/``.

    Several processes may open the same folder (``citewell serve`` and ``citewell ingest`` at
    once): writes serialise on SQLite's lock and the lexical index's lock file, and every search
    first catches up with commits made elsewhere.
    """

    def __init__(
        self,
        folder: Path,
        *,
        embedder: str,
        dim: int,
        threads: int = 1,
        ann_threshold: int = 50_000,
        trace_retention_days: int = 30,
        answer_retention_days: int = 30,
        blobs: BlobStore | None = None,
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.embedder = embedder
        self._path = folder / "citewell.db"
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._write_lock = threading.RLock()
        self._sync_lock = threading.Lock()
        if min(trace_retention_days, answer_retention_days) < 0:
            raise ValueError("retention days must be >= 0")
        self.trace_retention_days = trace_retention_days
        self.answer_retention_days = answer_retention_days
        with _store_errors():
            migrate(self._conn())
        self._purge_traces()
        self._purge_answers()
        self.blobs = blobs or BlobStore(FolderObjects(folder / "blobs"))
        self.lexical = LexicalIndex(folder / "lexical", threads=threads)
        self._ann_threshold = ann_threshold
        self._threads = threads
        self.vectors = self._new_vector_index(dim)
        self._loaded: set[int] = set()
        self._generation = -1
        self._allowed_cache: dict[tuple[object, ...], tuple[int, list[int]]] = {}
        self._recover()
        self._sync()

    # connections and transactions -----------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self._path, isolation_level=None, check_same_thread=False, timeout=30
            )
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")  # durable across process crashes in WAL
            conn.execute("PRAGMA foreign_keys = ON")
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._write_lock, _store_errors():
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with _store_errors():
            return self._conn().execute(sql, params).fetchall()

    @staticmethod
    def _bump_generation(conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'generation'")

    def _new_vector_index(self, dim: int) -> VectorIndex:
        return VectorIndex(dim, ann_threshold=self._ann_threshold, threads=self._threads)

    def close(self) -> None:
        self.lexical.close()
        self.vectors.close()
        with self._connections_lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()

    # buckets ---------------------------------------------------------------------------------
    def create_bucket(self, slug: str, *, tenant_id: str, name: str | None = None) -> Bucket:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO buckets (id, tenant_id, slug, name, created_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (tenant_id, slug) DO NOTHING",
                (new_id("bkt"), tenant_id, slug, name or slug, _now()),
            )
        return self.get_bucket(slug, tenant_id=tenant_id)

    def get_bucket(self, id_or_slug: str, *, tenant_id: str) -> Bucket:
        rows = self._read(
            "SELECT id, tenant_id, slug, name, created_at FROM buckets"
            " WHERE tenant_id = ? AND (id = ? OR slug = ?)",
            (tenant_id, id_or_slug, id_or_slug),
        )
        if not rows:
            raise NotFound(f"no bucket '{id_or_slug}'", param="bucket")
        return _bucket(rows[0])

    def list_buckets(self, *, tenant_id: str) -> list[Bucket]:
        rows = self._read(
            "SELECT id, tenant_id, slug, name, created_at FROM buckets WHERE tenant_id = ?"
            " ORDER BY slug",
            (tenant_id,),
        )
        return [_bucket(row) for row in rows]

    def rename_bucket(
        self, bucket_id: str, *, slug: str | None = None, name: str | None = None
    ) -> Bucket:
        with self._write() as conn:
            row = conn.execute(
                "SELECT tenant_id, slug, name FROM buckets WHERE id = ?", (bucket_id,)
            ).fetchone()
            if row is None:
                raise NotFound(f"no bucket '{bucket_id}'", param="bucket")
            taken = conn.execute(
                "SELECT 1 FROM buckets WHERE tenant_id = ? AND slug = ? AND id != ?",
                (row["tenant_id"], slug, bucket_id),
            ).fetchone()
            if taken is not None:
                raise Conflict(f"a bucket with slug '{slug}' already exists", param="slug")
            conn.execute(
                "UPDATE buckets SET slug = ?, name = ? WHERE id = ?",
                (slug or row["slug"], row["name"] if name is None else name, bucket_id),
            )
        return self.get_bucket(bucket_id, tenant_id=row["tenant_id"])

    def delete_bucket(self, bucket_id: str) -> None:
        with self._write() as conn:
            rows = conn.execute(
                "SELECT s.key, s.content_hash FROM sources s JOIN buckets b ON b.key = s.bucket_key"
                " WHERE b.id = ?",
                (bucket_id,),
            ).fetchall()
            self._forget_sources(conn, [row["key"] for row in rows])
            if conn.execute("DELETE FROM buckets WHERE id = ?", (bucket_id,)).rowcount == 0:
                raise NotFound(f"no bucket '{bucket_id}'", param="bucket")
        self._after_removal({row["content_hash"] for row in rows})

    # sources ---------------------------------------------------------------------------------
    def find_source(self, bucket_id: str, content_hash: str) -> Source | None:
        rows = self._read(
            f"SELECT {_SOURCE_COLUMNS} FROM sources s JOIN buckets b ON b.key = s.bucket_key"
            " WHERE b.id = ? AND s.content_hash = ? AND s.status = 'ready'",
            (bucket_id, content_hash),
        )
        return _source(rows[0]) if rows else None

    def add_source(self, draft: SourceDraft) -> Source:
        if len(draft.vectors) != len(draft.chunks) or len(draft.vector_keys) != len(draft.chunks):
            raise ValueError("one vector and one vector key per chunk are required")
        self.blobs.put(draft.content, draft.content_hash)
        source_id = draft.id or new_source_id()
        source_key = self._insert_pending(source_id, draft)
        try:
            with self.lexical.writer() as writer:
                writer.add(
                    LexicalDoc(
                        chunk_id=chunk_id(source_id, index),
                        source_key=source_key,
                        text=draft.text[chunk.span.start : chunk.span.end],
                        language=chunk.language,
                    )
                    for index, chunk in enumerate(draft.chunks)
                )
            self._publish(source_key, draft)
        except BaseException:
            self._abandon(source_key)
            raise
        return self.get_source(source_id)

    def _insert_pending(self, source_id: str, draft: SourceDraft) -> int:
        with self._write() as conn:
            bucket = conn.execute("SELECT key FROM buckets WHERE id = ?", (draft.bucket_id,))
            bucket_row = bucket.fetchone()
            if bucket_row is None:
                raise NotFound(f"no bucket '{draft.bucket_id}'", param="bucket")
            duplicate = conn.execute(
                "SELECT id FROM sources WHERE bucket_key = ? AND content_hash = ?",
                (bucket_row["key"], draft.content_hash),
            ).fetchone()
            if duplicate is not None:
                raise Conflict(f"the bucket already holds these bytes as source {duplicate['id']}")
            cursor = conn.execute(
                "INSERT INTO sources (id, bucket_key, filename, mime_type, content_hash, byte_size,"
                " version, status, ingest_pid, title, language, modality, page_count, char_count,"
                " chunk_count, effective_date, acl, metadata, created_at, text)"
                " VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    source_id,
                    bucket_row["key"],
                    draft.filename,
                    draft.mime_type,
                    draft.content_hash,
                    len(draft.content),
                    _PENDING,
                    os.getpid(),
                    draft.title,
                    draft.language,
                    draft.modality.value,
                    len(draft.pages) or None,
                    len(draft.text),
                    len(draft.chunks),
                    draft.effective_date.isoformat() if draft.effective_date else None,
                    json.dumps(sorted(draft.acl)),
                    json.dumps(draft.metadata, sort_keys=True),
                    _now(),
                    draft.text,
                ),
            )
            source_key = cursor.lastrowid
            assert source_key is not None
            self._insert_derived(conn, source_key, source_id, draft)
            return source_key

    def _insert_derived(
        self, conn: sqlite3.Connection, source_key: int, source_id: str, draft: SourceDraft
    ) -> None:
        confidences = draft.char_confidences or [None] * len(draft.pages)
        conn.executemany(
            "INSERT INTO pages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                (
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
                for page, boxes, read in zip(
                    draft.pages, draft.char_boxes, confidences, strict=True
                )
            ),
        )
        conn.executemany(
            "INSERT INTO chunks (id, source_key, idx, start, end, heading_path, page_numbers,"
            " sentences, language, vector_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                (
                    chunk_id(source_id, index),
                    source_key,
                    index,
                    chunk.span.start,
                    chunk.span.end,
                    json.dumps(chunk.heading_path, ensure_ascii=False),
                    json.dumps(chunk.page_numbers),
                    json.dumps([[s.start, s.end] for s in chunk.sentences]),
                    chunk.language,
                    key,
                )
                for index, (chunk, key) in enumerate(
                    zip(draft.chunks, draft.vector_keys, strict=True)
                )
            ),
        )
        self._insert_vectors(conn, draft.embedder, draft.vector_keys, draft.vectors)

    @staticmethod
    def _insert_vectors(
        conn: sqlite3.Connection, embedder: str, keys: Sequence[str], vectors: Vectors
    ) -> None:
        conn.executemany(
            "INSERT OR IGNORE INTO vectors VALUES (?, ?, ?)",
            (
                (embedder, key, np.ascontiguousarray(vector, dtype=np.float32).tobytes())
                for key, vector in zip(keys, vectors, strict=True)
            ),
        )

    def _publish(self, source_key: int, draft: SourceDraft) -> None:
        """Make a pending source ready, as the new current version of its filename."""
        with self._write() as conn:
            previous = conn.execute(
                "SELECT key, id, version FROM sources WHERE bucket_key ="
                " (SELECT bucket_key FROM sources WHERE key = ?) AND filename = ?"
                " AND status = 'ready' AND superseded_by IS NULL",
                (source_key, draft.filename),
            ).fetchone()
            source_id = conn.execute(
                "SELECT id FROM sources WHERE key = ?", (source_key,)
            ).fetchone()["id"]
            conn.execute(
                "UPDATE sources SET status = ?, ingest_pid = NULL, version = ?, supersedes = ?"
                " WHERE key = ?",
                (
                    SourceStatus.READY.value,
                    previous["version"] + 1 if previous else 1,
                    previous["id"] if previous else None,
                    source_key,
                ),
            )
            if previous is not None:
                conn.execute(
                    "UPDATE sources SET superseded_by = ? WHERE key = ?",
                    (source_id, previous["key"]),
                )
            self._bump_generation(conn)

    def _abandon(self, source_key: int) -> None:
        """Remove a pending source after its ingest failed or its process died."""
        with self._write() as conn:
            row = conn.execute(
                "SELECT content_hash FROM sources WHERE key = ? AND status = ?",
                (source_key, _PENDING),
            ).fetchone()
            if row is None:
                return
            self._forget_sources(conn, [source_key])
        self._after_removal({row["content_hash"]})

    def get_source(self, source_id: str) -> Source:
        source = self.get_sources([source_id]).get(source_id)
        if source is None:
            raise NotFound(f"no source '{source_id}'", param="source_id")
        return source

    def get_sources(self, source_ids: Iterable[str]) -> dict[str, Source]:
        ids = list(dict.fromkeys(source_ids))
        found: dict[str, Source] = {}
        for batch in _batches(ids):
            rows = self._read(
                f"SELECT {_SOURCE_COLUMNS} FROM sources s JOIN buckets b ON b.key = s.bucket_key"
                f" WHERE s.status = 'ready' AND s.id IN ({_marks(batch)})",
                batch,
            )
            found.update((row["id"], _source(row)) for row in rows)
        return found

    def list_sources(self, bucket_id: str, *, include_superseded: bool = False) -> list[Source]:
        current = "" if include_superseded else " AND s.superseded_by IS NULL"
        rows = self._read(
            f"SELECT {_SOURCE_COLUMNS} FROM sources s JOIN buckets b ON b.key = s.bucket_key"
            f" WHERE b.id = ? AND s.status = 'ready'{current} ORDER BY s.filename, s.version",
            (bucket_id,),
        )
        return [_source(row) for row in rows]

    def delete_source(self, source_id: str) -> None:
        with self._write() as conn:
            row = conn.execute(
                "SELECT key, content_hash, supersedes, superseded_by FROM sources"
                " WHERE id = ? AND status = 'ready'",
                (source_id,),
            ).fetchone()
            if row is None:
                raise NotFound(f"no source '{source_id}'", param="source_id")
            # Close the gap in the version chain; deleting the newest makes the previous current.
            conn.execute(
                "UPDATE sources SET superseded_by = ? WHERE id = ?",
                (row["superseded_by"], row["supersedes"]),
            )
            conn.execute(
                "UPDATE sources SET supersedes = ? WHERE id = ?",
                (row["supersedes"], row["superseded_by"]),
            )
            self._forget_sources(conn, [row["key"]])
        self._after_removal({row["content_hash"]})

    def _forget_sources(self, conn: sqlite3.Connection, source_keys: Sequence[int]) -> None:
        """Delete sources and their derived rows, queueing their lexical documents for removal."""
        for batch in _batches(source_keys):
            vector_keys = [
                row["vector_key"]
                for row in conn.execute(
                    f"SELECT DISTINCT vector_key FROM chunks WHERE source_key IN ({_marks(batch)})",
                    batch,
                )
            ]
            conn.executemany(
                "INSERT OR IGNORE INTO lexical_garbage VALUES (?)", ((k,) for k in batch)
            )
            conn.execute(
                "DELETE FROM answers WHERE id IN (SELECT a.response_id FROM answer_sources a"
                f" JOIN sources s ON s.id = a.source_id WHERE s.key IN ({_marks(batch)}))",
                batch,
            )
            conn.execute(f"DELETE FROM sources WHERE key IN ({_marks(batch)})", batch)
            for keys in _batches(vector_keys):
                conn.execute(
                    f"DELETE FROM vectors WHERE vector_key IN ({_marks(keys)}) AND vector_key"
                    " NOT IN (SELECT vector_key FROM chunks)",
                    keys,
                )
        self._bump_generation(conn)

    def _after_removal(self, content_hashes: set[str]) -> None:
        """Finish a removal outside the transaction: lexical documents, then unshared originals."""
        self._collect_lexical_garbage()
        for digest in content_hashes:
            if not self._read(_HELD, (digest, digest)):
                self.blobs.delete(digest)

    def _collect_lexical_garbage(self) -> None:
        keys = [row[0] for row in self._read("SELECT source_key FROM lexical_garbage")]
        if not keys:
            return
        with self.lexical.writer() as writer:
            for key in keys:
                writer.delete_source(key)
        with self._write() as conn:
            for batch in _batches(keys):
                conn.execute(
                    f"DELETE FROM lexical_garbage WHERE source_key IN ({_marks(batch)})", batch
                )

    def _recover(self) -> None:
        """Remove what ingests that died mid-way left behind (their process is gone)."""
        self.blobs.sweep_temporary()
        rows = self._read("SELECT key, ingest_pid FROM sources WHERE status = ?", (_PENDING,))
        for row in rows:
            if not _process_alive(row["ingest_pid"]):
                self._abandon(row["key"])
        self._collect_lexical_garbage()

    # text, pages, originals -----------------------------------------------------------------
    def source_text(self, source_id: str) -> str:
        rows = self._read(
            "SELECT text FROM sources WHERE id = ? AND status = 'ready'", (source_id,)
        )
        if not rows:
            raise NotFound(f"no source '{source_id}'", param="source_id")
        return str(rows[0]["text"])

    def source_pages(self, source_id: str) -> tuple[Page, ...]:
        rows = self._read(
            "SELECT p.number, p.label, p.start, p.end, p.width, p.height, p.modality,"
            " p.ocr_confidence FROM pages p JOIN sources s ON s.key = p.source_key"
            " WHERE s.id = ? ORDER BY p.number",
            (source_id,),
        )
        return tuple(
            Page(
                number=row["number"],
                label=row["label"],
                span=Span(start=row["start"], end=row["end"]),
                width=row["width"],
                height=row["height"],
                modality=Modality(row["modality"]),
                ocr_confidence=row["ocr_confidence"],
            )
            for row in rows
        )

    def char_boxes(self, source_id: str, page_number: int) -> CharBoxes:
        return unpack_boxes(self._page_column("boxes", source_id, page_number))

    def char_confidences(self, source_id: str, page_number: int) -> CharConfidences:
        return unpack_confidences(self._page_column("confidences", source_id, page_number))

    def _page_column(self, column: str, source_id: str, page_number: int) -> Any:
        """One stored column of a page (``column`` is ours, never the caller's)."""
        rows = self._read(
            f"SELECT p.{column} FROM pages p JOIN sources s ON s.key = p.source_key"
            " WHERE s.id = ? AND p.number = ?",
            (source_id, page_number),
        )
        if not rows:
            raise NotFound(f"no page {page_number} in source '{source_id}'", param="page")
        return rows[0][column]

    def original(self, source_id: str) -> bytes:
        return self.blobs.get(self.get_source(source_id).content_hash)

    def get_chunks(self, chunk_ids: Sequence[str]) -> dict[str, Chunk]:
        found: dict[str, Chunk] = {}
        for batch in _batches(list(dict.fromkeys(chunk_ids))):
            rows = self._read(
                f"SELECT {_CHUNK_COLUMNS} FROM chunks c JOIN sources s ON s.key = c.source_key"
                f" WHERE c.id IN ({_marks(batch)})",
                batch,
            )
            found.update((row["id"], _chunk(row)) for row in rows)
        return found

    # vectors ---------------------------------------------------------------------------------
    def cached_vectors(self, embedder: str, keys: Sequence[str]) -> dict[str, Vectors]:
        found: dict[str, Vectors] = {}
        for batch in _batches(list(dict.fromkeys(keys))):
            rows = self._read(
                f"SELECT vector_key, vector FROM vectors WHERE embedder = ?"
                f" AND vector_key IN ({_marks(batch)})",
                [embedder, *batch],
            )
            found.update((row[0], np.frombuffer(row[1], dtype=np.float32)) for row in rows)
        return found

    def chunks_without_vectors(self, embedder: str, *, limit: int) -> list[tuple[str, Chunk]]:
        rows = self._read(
            f"SELECT c.vector_key, {_CHUNK_COLUMNS} FROM chunks c"
            " JOIN sources s ON s.key = c.source_key WHERE s.status = 'ready' AND NOT EXISTS"
            " (SELECT 1 FROM vectors v WHERE v.embedder = ? AND v.vector_key = c.vector_key)"
            " GROUP BY c.vector_key LIMIT ?",
            (embedder, limit),
        )
        return [(row["vector_key"], _chunk(row)) for row in rows]

    def put_vectors(self, embedder: str, keys: Sequence[str], vectors: Vectors) -> None:
        with self._write() as conn:
            self._insert_vectors(conn, embedder, keys, vectors)
            self._bump_generation(conn)
        if embedder == self.embedder:
            with self._sync_lock:
                self._loaded.clear()  # reload: chunks of loaded sources may have gained vectors
                stale, self.vectors = self.vectors, self._new_vector_index(self.vectors.dim)
                stale.close()
                self._generation = -1

    # answers ---------------------------------------------------------------------------------
    def put_answer(self, stored: StoredAnswer) -> None:
        self._purge_answers()
        if self.answer_retention_days == 0:
            return
        with self._write() as conn:
            if (
                stored.previous_id is not None
                and not conn.execute(
                    "SELECT 1 FROM answers WHERE id = ?", (stored.previous_id,)
                ).fetchone()
            ):
                # The answer it continues was deleted with a source while this one was made:
                # its conversation quotes that source's text.
                return
            conn.execute(
                "INSERT INTO answers (id, tenant_id, answer_id, created_at, answer, conversation,"
                " rendered, previous_id, key_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    stored.id,
                    stored.tenant_id,
                    stored.answer.id,
                    _now(),
                    stored.answer.model_dump_json(),
                    json.dumps(stored.conversation, ensure_ascii=False),
                    stored.rendered,
                    stored.previous_id,
                    stored.key_id,
                ),
            )
            conn.executemany(
                "INSERT INTO answer_sources (source_id, response_id) VALUES (?, ?)",
                ((source_id, stored.id) for source_id in sorted(sources_quoted(stored.answer))),
            )
            conn.execute(
                "INSERT OR IGNORE INTO answer_sources (source_id, response_id)"
                " SELECT source_id, ? FROM answer_sources WHERE response_id = ?",
                (stored.id, stored.previous_id),
            )

    def get_answer(self, answer_id: str, *, tenant_id: str) -> StoredAnswer:
        rows = self._read(
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
            conversation=tuple((role, text) for role, text in json.loads(row["conversation"])),
            previous_id=row["previous_id"],
            key_id=row["key_id"],
        )

    # traces ----------------------------------------------------------------------------------
    def put_trace(self, stored: StoredTrace) -> None:
        with self._write() as conn:
            if self.trace_retention_days > 0:
                conn.execute(
                    "INSERT OR REPLACE INTO traces (answer_id, agent, created_at, trace)"
                    " VALUES (?, ?, ?, ?)",
                    (
                        stored.answer_id,
                        stored.agent,
                        _utc_text(stored.created_at),
                        stored.trace.model_dump_json(),
                    ),
                )
            conn.execute("DELETE FROM traces WHERE created_at < ?", (self._trace_cutoff(),))

    def list_traces(self) -> list[StoredTrace]:
        rows = self._read(
            "SELECT answer_id, agent, created_at, trace FROM traces ORDER BY created_at, answer_id"
        )
        return [
            StoredTrace(
                answer_id=row["answer_id"],
                agent=row["agent"],
                created_at=datetime.strptime(row["created_at"], _UTC_FORMAT).replace(tzinfo=UTC),
                trace=Trace.model_validate_json(row["trace"]),
            )
            for row in rows
        ]

    def _trace_cutoff(self) -> str:
        return _utc_text(datetime.now(UTC) - timedelta(days=self.trace_retention_days))

    def _purge_answers(self) -> None:
        """Drop the stored answers older than the retention (with what they quote)."""
        cutoff = datetime.now(UTC) - timedelta(days=self.answer_retention_days)
        with self._write() as conn:
            conn.execute("DELETE FROM answers WHERE created_at < ?", (cutoff.isoformat(),))

    def _purge_traces(self) -> None:
        """Drop the traces older than the retention (all of them for 0 days)."""
        with self._write() as conn:
            conn.execute("DELETE FROM traces WHERE created_at < ?", (self._trace_cutoff(),))

    # tenants and keys ------------------------------------------------------------------------
    def create_tenant(self, name: str) -> Tenant:
        tenant = Tenant(id=new_id("ten"), name=name, created_at=datetime.now(UTC))
        with self._write() as conn:
            conn.execute(
                "INSERT INTO tenants (id, name, created_at) VALUES (?, ?, ?)",
                (tenant.id, tenant.name, tenant.created_at.isoformat()),
            )
        return tenant

    def get_tenant(self, tenant_id: str) -> Tenant:
        rows = self._read("SELECT id, name, created_at FROM tenants WHERE id = ?", (tenant_id,))
        if not rows:
            raise NotFound(f"No tenant found with id '{tenant_id}'.", param="tenant_id")
        return _tenant(rows[0])

    def list_tenants(self) -> list[Tenant]:
        rows = self._read(
            "SELECT id, name, created_at FROM tenants ORDER BY id != 'default', created_at, id"
        )
        return [_tenant(row) for row in rows]

    def put_key(self, key: ApiKey, secret_hash: str) -> None:
        self.get_tenant(key.tenant_id)
        with self._write() as conn:
            conn.execute(
                "INSERT INTO api_keys (id, tenant_id, name, secret_hash, permissions, bucket_ids,"
                " acl_labels, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                (
                    key.id,
                    key.tenant_id,
                    key.name,
                    secret_hash,
                    json.dumps(sorted(key.permissions)),
                    _json_set(key.bucket_ids),
                    _json_set(key.acl_labels),
                    key.created_at.isoformat(),
                ),
            )

    def get_key(self, key_id: str) -> tuple[ApiKey, str]:
        rows = self._read(
            f"SELECT {_KEY_COLUMNS}, secret_hash FROM api_keys WHERE id = ?", (key_id,)
        )
        if not rows:
            raise NotFound(f"No API key found with id '{key_id}'.", param="key_id")
        return _api_key(rows[0]), rows[0]["secret_hash"]

    def list_keys(self, tenant_id: str) -> list[ApiKey]:
        rows = self._read(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE tenant_id = ? ORDER BY created_at, id",
            (tenant_id,),
        )
        return [_api_key(row) for row in rows]

    def revoke_key(self, key_id: str, *, tenant_id: str) -> ApiKey:
        with self._write() as conn:
            conn.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND tenant_id = ?"
                " AND revoked_at IS NULL",
                (_now(), key_id, tenant_id),
            )
        key, _ = self.get_key(key_id)
        if key.tenant_id != tenant_id:
            raise NotFound(f"No API key found with id '{key_id}'.", param="key_id")
        return key

    # agents ----------------------------------------------------------------------------------
    def put_agent(self, agent: Agent, *, tenant_id: str) -> None:
        self.get_tenant(tenant_id)
        with self._write() as conn:
            conn.execute(
                "INSERT INTO agents (tenant_id, name, agent, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (tenant_id, name) DO UPDATE SET agent = excluded.agent",
                (tenant_id, agent.name, agent.model_dump_json(), _now()),
            )

    def list_agents(self, *, tenant_id: str) -> list[Agent]:
        rows = self._read(
            "SELECT agent FROM agents WHERE tenant_id = ? ORDER BY created_at, name", (tenant_id,)
        )
        return [Agent.model_validate_json(row["agent"]) for row in rows]

    def delete_agent(self, name: str, *, tenant_id: str) -> None:
        with self._write() as conn:
            deleted = conn.execute(
                "DELETE FROM agents WHERE tenant_id = ? AND name = ?", (tenant_id, name)
            ).rowcount
        if not deleted:
            raise NotFound(f"No agent named '{name}'.", param="name")

    # ingest jobs -----------------------------------------------------------------------------
    def add_job(self, job: IngestJob, content: bytes, *, owner: str, lease_seconds: float) -> None:
        self.blobs.put(content, job.content_hash)
        now = datetime.now(UTC)
        with self._write() as conn:
            conn.execute(
                f"INSERT INTO ingest_jobs ({_JOB_COLUMNS}, lease_owner, lease_expires, updated_at)"
                f" VALUES ({_marks(range(21))})",
                (
                    job.source_id,
                    job.tenant_id,
                    job.bucket_id,
                    job.filename,
                    job.mime_type,
                    job.content_hash,
                    job.byte_size,
                    json.dumps(sorted(job.acl)),
                    json.dumps(job.metadata, sort_keys=True),
                    job.effective_date.isoformat() if job.effective_date else None,
                    JobState.RUNNING.value,
                    job.attempts,
                    job.pages_done,
                    job.pages_total,
                    None,
                    None,
                    False,
                    _utc_text(job.created_at),
                    owner,
                    _utc_text(now + timedelta(seconds=lease_seconds)),
                    _utc_text(now),
                ),
            )
        # Again: a failed job elsewhere may have taken the shared bytes away meanwhile.
        self.blobs.put(content, job.content_hash)

    def get_job(self, job_id: str) -> IngestJob:
        rows = self._read(f"SELECT {_JOB_COLUMNS} FROM ingest_jobs WHERE id = ?", (job_id,))
        if not rows:
            raise NotFound(f"no source '{job_id}'", param="source_id")
        return _job(rows[0])

    def list_jobs(self, bucket_id: str) -> list[IngestJob]:
        rows = self._read(
            f"SELECT {_JOB_COLUMNS} FROM ingest_jobs WHERE bucket_id = ? ORDER BY created_at, id",
            (bucket_id,),
        )
        return [_job(row) for row in rows]

    def find_job(self, bucket_id: str, content_hash: str) -> IngestJob | None:
        rows = self._read(
            f"SELECT {_JOB_COLUMNS} FROM ingest_jobs WHERE bucket_id = ? AND content_hash = ?"
            " AND state IN ('queued', 'running') ORDER BY created_at LIMIT 1",
            (bucket_id, content_hash),
        )
        return _job(rows[0]) if rows else None

    def job_content(self, job_id: str) -> bytes:
        return self.blobs.get(self.get_job(job_id).content_hash)

    def claim_job(self, *, owner: str, lease_seconds: float, max_attempts: int) -> IngestJob | None:
        now = datetime.now(UTC)
        takeable = "(state = 'queued' OR (state = 'running' AND lease_expires < ?))"
        with self._write() as conn:  # BEGIN IMMEDIATE: one claimer at a time, in any process
            exhausted = conn.execute(
                "UPDATE ingest_jobs SET state = 'failed', error = ?, lease_owner = NULL,"
                f" lease_expires = NULL, updated_at = ? WHERE {takeable} AND attempts >= ?"
                " RETURNING content_hash",
                (job_interrupted(max_attempts), _utc_text(now), _utc_text(now), max_attempts),
            ).fetchall()
            row = conn.execute(
                "UPDATE ingest_jobs SET state = 'running', attempts = attempts + 1,"
                " lease_owner = ?, lease_expires = ?, updated_at = ? WHERE id = (SELECT id FROM"
                f" ingest_jobs WHERE {takeable} ORDER BY created_at LIMIT 1)"
                f" RETURNING {_JOB_COLUMNS}",
                (
                    owner,
                    _utc_text(now + timedelta(seconds=lease_seconds)),
                    _utc_text(now),
                    _utc_text(now),
                ),
            ).fetchone()
        self._after_removal({r["content_hash"] for r in exhausted})
        return None if row is None else _job(row)

    def renew_jobs(self, *, owner: str, lease_seconds: float) -> None:
        expires = _utc_text(datetime.now(UTC) + timedelta(seconds=lease_seconds))
        with self._write() as conn:
            conn.execute(
                "UPDATE ingest_jobs SET lease_expires = ? WHERE lease_owner = ?"
                " AND state = 'running'",
                (expires, owner),
            )

    def job_progress(self, job_id: str, *, owner: str, done: int, total: int) -> None:
        with self._write() as conn:
            conn.execute(
                "UPDATE ingest_jobs SET pages_done = ?, pages_total = ?, updated_at = ?"
                " WHERE id = ? AND lease_owner = ? AND state = 'running'",
                (done, total, _utc_text(datetime.now(UTC)), job_id, owner),
            )

    def finish_job(
        self,
        job_id: str,
        *,
        owner: str,
        result_id: str | None = None,
        error: str | None = None,
        unreadable: bool = False,
    ) -> None:
        state = JobState.DONE if error is None else JobState.FAILED
        with self._write() as conn:
            row = conn.execute(
                "UPDATE ingest_jobs SET state = ?, result_id = ?, error = ?, unreadable = ?,"
                " lease_owner = NULL, lease_expires = NULL, updated_at = ?"
                " WHERE id = ? AND lease_owner = ? AND state = 'running' RETURNING content_hash",
                (
                    state.value,
                    result_id,
                    error,
                    unreadable,
                    _utc_text(datetime.now(UTC)),
                    job_id,
                    owner,
                ),
            ).fetchone()
            conn.execute(_FORGET_OLD_JOBS, (KEPT_FINISHED,))
        if row is not None and error is not None:
            self._after_removal({row["content_hash"]})

    def release_jobs(self, *, owner: str) -> None:
        with self._write() as conn:
            conn.execute(
                "UPDATE ingest_jobs SET state = 'queued', attempts = attempts - 1,"
                " lease_owner = NULL, lease_expires = NULL WHERE lease_owner = ?"
                " AND state = 'running'",
                (owner,),
            )

    def delete_job(self, job_id: str) -> None:
        with self._write() as conn:
            deleted = conn.execute(
                "DELETE FROM ingest_jobs WHERE id = ? AND state IN ('done', 'failed')", (job_id,)
            ).rowcount
        if not deleted:
            raise job_under_way(self.get_job(job_id).source_id)

    # search ----------------------------------------------------------------------------------
    def search_lexical(self, query: str, scope: Scope, *, limit: int) -> list[ChunkHit]:
        allowed = self._allowed_source_keys(scope)
        if not allowed:
            return []
        return self.lexical.search(query, source_keys=allowed, limit=limit)

    def search_dense(self, vector: Vectors, scope: Scope, *, limit: int) -> list[ChunkHit]:
        allowed = self._allowed_source_keys(scope)
        if not allowed:
            return []
        return self.vectors.search(vector, source_keys=allowed, limit=limit)

    def search_hybrid(
        self, query: str, vector: Vectors, scope: Scope, *, limit: int, fusion: Fusion
    ) -> list[FusedHit]:
        allowed = self._allowed_source_keys(scope)
        if not allowed:
            return []
        lexical = self.lexical.search(query, source_keys=allowed, limit=fusion.candidates)
        dense = self.vectors.search(vector, source_keys=allowed, limit=fusion.candidates)
        return fuse(lexical, dense, fusion, limit=limit)

    def _allowed_source_keys(self, scope: Scope) -> list[int]:
        """Keys of the sources the scope may see: the permission check, done in SQL.

        Answers are kept until the next write anywhere (a new generation), so a run of searches
        in one bucket pays for the query once.
        """
        generation = self._sync()
        key = (
            scope.principal,
            scope.bucket_ids,
            scope.include_superseded,
            None if scope.filters is None else scope.filters.model_dump_json(),
        )
        cached = self._allowed_cache.get(key)
        if cached is not None and cached[0] == generation:
            return cached[1]
        allowed = self._query_allowed_source_keys(scope)
        if len(self._allowed_cache) >= _ALLOWED_CACHE_SIZE:
            self._allowed_cache.clear()
        self._allowed_cache[key] = (generation, allowed)
        return allowed

    def _query_allowed_source_keys(self, scope: Scope) -> list[int]:
        bucket_ids = list(scope.bucket_ids)
        if scope.principal.bucket_ids is not None:
            bucket_ids = [b for b in bucket_ids if b in scope.principal.bucket_ids]
        if not bucket_ids:
            return []
        sql = (
            "SELECT s.key FROM sources s JOIN buckets b ON b.key = s.bucket_key"
            f" WHERE s.status = 'ready' AND b.tenant_id = ? AND b.id IN ({_marks(bucket_ids)})"
        )
        params: list[SqlParam] = [scope.principal.tenant_id, *bucket_ids]
        if not scope.include_superseded:
            sql += " AND s.superseded_by IS NULL"
        if not scope.principal.sees_all_labels:
            labels = sorted(scope.principal.acl_labels)
            sql += " AND (s.acl = '[]'"
            if labels:
                sql += (
                    f" OR EXISTS (SELECT 1 FROM json_each(s.acl) WHERE value IN ({_marks(labels)}))"
                )
                params.extend(labels)
            sql += ")"
        if scope.filters is not None:
            condition, filter_params = compile_filter(scope.filters)
            sql += f" AND ({condition})"
            params.extend(filter_params)
        return [row[0] for row in self._read(sql, params)]

    def _sync(self) -> int:
        """Catch up the in-memory indexes with commits made by this or another process.

        Returns the generation now seen.
        """
        generation = int(self._read("SELECT value FROM meta WHERE key = 'generation'")[0][0])
        if generation == self._generation:
            return generation
        with self._sync_lock:
            if generation == self._generation:
                return generation
            self.lexical.refresh()
            ready = {row[0] for row in self._read("SELECT key FROM sources WHERE status = 'ready'")}
            gone = self._loaded - ready
            if gone:
                self.vectors.remove_sources(gone)
            self._load_vectors(sorted(ready - self._loaded))
            self._loaded = ready
            self._generation = generation
        return generation

    def _load_vectors(self, source_keys: Sequence[int]) -> None:
        for batch in _batches(source_keys):
            rows = self._read(
                "SELECT c.id, c.source_key, v.vector FROM chunks c JOIN vectors v"
                " ON v.embedder = ? AND v.vector_key = c.vector_key"
                f" WHERE c.source_key IN ({_marks(batch)}) ORDER BY c.key",
                [self.embedder, *batch],
            )
            if rows:
                self.vectors.add(
                    [row[0] for row in rows],
                    np.fromiter((row[1] for row in rows), dtype=np.int64, count=len(rows)),
                    np.frombuffer(b"".join(row[2] for row in rows), dtype=np.float32).reshape(
                        len(rows), -1
                    ),
                )


# helpers -------------------------------------------------------------------------------------
def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" * len(values))


def _batches(values: Sequence[Any], size: int = 500) -> Iterator[list[Any]]:
    """Slices small enough for SQLite's limit on bound parameters."""
    for start in range(0, len(values), size):
        yield list(values[start : start + size])


def _process_alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_KEY_COLUMNS = "id, tenant_id, name, permissions, bucket_ids, acl_labels, created_at, revoked_at"


def _json_set(values: frozenset[str] | None) -> str | None:
    return None if values is None else json.dumps(sorted(values), ensure_ascii=False)


def _tenant(row: sqlite3.Row) -> Tenant:
    return Tenant(
        id=row["id"], name=row["name"], created_at=datetime.fromisoformat(row["created_at"])
    )


def _api_key(row: sqlite3.Row) -> ApiKey:
    def a_set(column: str) -> frozenset[str] | None:
        value = row[column]
        return None if value is None else frozenset(json.loads(value))

    revoked = row["revoked_at"]
    return ApiKey(
        id=row["id"],
        tenant_id=row["tenant_id"],
        name=row["name"],
        permissions=frozenset(Permission(p) for p in json.loads(row["permissions"])),
        bucket_ids=a_set("bucket_ids"),
        acl_labels=a_set("acl_labels"),
        created_at=datetime.fromisoformat(row["created_at"]),
        revoked_at=None if revoked is None else datetime.fromisoformat(revoked),
    )


def _bucket(row: sqlite3.Row) -> Bucket:
    return Bucket(
        id=row["id"],
        tenant_id=row["tenant_id"],
        slug=row["slug"],
        name=row["name"],
        created_at=datetime.fromisoformat(row["created_at"]),
    )


def _source(row: sqlite3.Row) -> Source:
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
        status=SourceStatus(row["status"]),
        title=row["title"],
        language=row["language"],
        modality=Modality(row["modality"]),
        page_count=row["page_count"],
        char_count=row["char_count"],
        chunk_count=row["chunk_count"],
        effective_date=date.fromisoformat(row["effective_date"]) if row["effective_date"] else None,
        acl=frozenset(json.loads(row["acl"])),
        metadata=json.loads(row["metadata"]),
        created_at=datetime.fromisoformat(row["created_at"]),
    )


def _chunk(row: sqlite3.Row) -> Chunk:
    return Chunk(
        id=row["id"],
        source_id=row["source_id"],
        index=row["idx"],
        span=Span(start=row["start"], end=row["end"]),
        text=row["text"],
        heading_path=tuple(json.loads(row["heading_path"])),
        page_numbers=tuple(json.loads(row["page_numbers"])),
        sentences=tuple(Span(start=a, end=b) for a, b in json.loads(row["sentences"])),
        language=row["language"],
    )


_JOB_COLUMNS = (
    "id, tenant_id, bucket_id, filename, mime_type, content_hash, byte_size, acl, metadata,"
    " effective_date, state, attempts, pages_done, pages_total, result_id, error, unreadable,"
    " created_at"
)
_FORGET_OLD_JOBS = (
    "DELETE FROM ingest_jobs WHERE state IN ('done', 'failed') AND id NOT IN (SELECT id FROM"
    " ingest_jobs WHERE state IN ('done', 'failed') ORDER BY updated_at DESC LIMIT ?)"
)


def _job(row: sqlite3.Row) -> IngestJob:
    return IngestJob(
        source_id=row["id"],
        tenant_id=row["tenant_id"],
        bucket_id=row["bucket_id"],
        filename=row["filename"],
        mime_type=row["mime_type"],
        content_hash=row["content_hash"],
        byte_size=row["byte_size"],
        acl=frozenset(json.loads(row["acl"])),
        metadata=json.loads(row["metadata"]),
        effective_date=date.fromisoformat(row["effective_date"]) if row["effective_date"] else None,
        created_at=datetime.strptime(row["created_at"], _UTC_FORMAT).replace(tzinfo=UTC),
        state=JobState(row["state"]),
        attempts=row["attempts"],
        pages_done=row["pages_done"],
        pages_total=row["pages_total"],
        result_id=row["result_id"],
        error=row["error"],
        unreadable=bool(row["unreadable"]),
    )


_HELD = (
    "SELECT 1 FROM sources WHERE content_hash = ? UNION ALL SELECT 1 FROM ingest_jobs"
    " WHERE content_hash = ? AND state IN ('queued', 'running') LIMIT 1"
)
"""Whether a source, or a job under way, holds an original (which is then kept)."""
