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
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from citewell.model import Source, SourceStatus
from citewell.scalar_text import loads_scalar
from citewell.store.base import (
    ChunkHit,
    FusedHit,
    Fusion,
    Retention,
    Scope,
    SourceDraft,
    Vectors,
    chunk_id,
)
from citewell.store.dialect import Clause, Dialect
from citewell.store.filters import SqlParam, compile_filter
from citewell.store.fusion import fuse
from citewell.store.objects import FolderObjects
from citewell.store.objects.blobs import BlobStore
from citewell.store.sql import CHUNK_ROW_COLUMNS, SqlStore, chunk_rows, page_rows, store_errors
from citewell.store.sqlite.lexical import LexicalDoc, LexicalIndex
from citewell.store.sqlite.schema import migrate
from citewell.store.sqlite.vectors import VectorIndex

__all__ = ["SQLiteStore"]

_PENDING = "pending"
_ALLOWED_CACHE_SIZE = 256
"""Scopes whose visible sources are remembered (until the next write)."""
_BUSY_SECONDS = 30.0
"""How long a connection waits for another's lock before the store fails."""


_UTC_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
"""Fixed-width UTC timestamps, so that text order is time order."""


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch the database to write-ahead logging, waiting as for any lock. SQLite answers
    "database is locked" at once, without waiting, while another process holds a write lock on
    a database not yet in WAL mode: another process creating the same store (two `citewell`
    commands started together on a new data folder, or two ingest workers)."""
    deadline = time.monotonic() + _BUSY_SECONDS
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _store_errors() -> AbstractContextManager[None]:
    return store_errors("SQLite", sqlite3.IntegrityError, sqlite3.Error)


class _SQLiteDialect(Dialect):
    """SQLite keeps times as ISO 8601 text (those it orders by as fixed-width UTC), labels as
    JSON, and one transaction writes at a time."""

    each = "json_each(?)"
    each_key = "json_each(?)"

    def time(self, moment: datetime) -> str:
        return moment.isoformat()

    def read_time(self, value: str) -> datetime:
        return datetime.fromisoformat(value)

    def stamp(self, moment: datetime) -> str:
        return moment.astimezone(UTC).strftime(_UTC_FORMAT)

    def read_stamp(self, value: str) -> datetime:
        return datetime.strptime(value, _UTC_FORMAT).replace(tzinfo=UTC)

    def labels(self, values: Iterable[str]) -> str:
        # ASCII-escaped, as sources' labels always were: a source's labels are compared whole.
        return json.dumps(sorted(values))

    def read_labels(self, value: str) -> list[str]:
        return list(loads_scalar(value))

    def keys(self, values: Iterable[int]) -> str:
        return json.dumps(list(values))

    def read_vector(self, value: bytes) -> Vectors:
        return np.frombuffer(value, dtype=np.float32)

    def json_value(self, value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)

    def read_json_value(self, value: str) -> Any:
        return loads_scalar(value)

    def day(self, value: date) -> str:
        return value.isoformat()

    def read_day(self, value: str) -> date:
        return date.fromisoformat(value)

    def now(self, moment: datetime) -> Clause:
        return Clause("?", (self.stamp(moment),))

    def later(self, moment: datetime, seconds: float) -> Clause:
        return Clause("?", (self.stamp(moment + timedelta(seconds=seconds)),))


class SQLiteStore(SqlStore[sqlite3.Connection]):
    """A Store in one folder: ``citewell.db``, ``lexical/`` and (unless ``blobs`` is given)
    ``blobs/``.

    Several processes may open the same folder (``citewell serve`` and ``citewell ingest`` at
    once): writes serialise on SQLite's lock and the lexical index's lock file, and every search
    first catches up with commits made elsewhere.
    """

    _dialect = _SQLiteDialect()
    _stored = "s.status = 'ready'"

    def __init__(
        self,
        folder: Path,
        *,
        embedder: str,
        dim: int,
        threads: int = 1,
        ann_threshold: int = 50_000,
        retention: Retention = Retention(),
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
        self.retention = retention
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
                self._path, isolation_level=None, check_same_thread=False, timeout=_BUSY_SECONDS
            )
            conn.row_factory = sqlite3.Row
            _use_wal(conn)
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

    # sources ---------------------------------------------------------------------------------
    def add_source(self, draft: SourceDraft) -> Source:
        if len(draft.vectors) != len(draft.chunks) or len(draft.vector_keys) != len(draft.chunks):
            raise ValueError("one vector and one vector key per chunk are required")
        self.blobs.put(draft.content, draft.content_hash)
        source_id = draft.id
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
            own = (("status", _PENDING), ("ingest_pid", os.getpid()))
            source_key = self._insert_source(conn, source_id, draft, *own)
            self._insert_derived(conn, source_key, source_id, draft)
            return source_key

    def _insert_derived(
        self, conn: sqlite3.Connection, source_key: int, source_id: str, draft: SourceDraft
    ) -> None:
        conn.executemany(
            "INSERT INTO pages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            page_rows(source_key, draft),
        )
        conn.executemany(
            f"INSERT INTO chunks ({CHUNK_ROW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            chunk_rows(source_id, source_key, draft, self._dialect),
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
            self._link_version(conn, source_key, draft)
            conn.execute(
                "UPDATE sources SET status = ?, ingest_pid = NULL WHERE key = ?",
                (SourceStatus.READY.value, source_key),
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

    def _forget_derived(self, conn: sqlite3.Connection, source_keys: Sequence[int]) -> None:
        """Queue the sources' lexical documents for removal (tantivy is not in the
        transaction: ``_collect_lexical_garbage`` removes them once it commits)."""
        conn.executemany(
            "INSERT OR IGNORE INTO lexical_garbage VALUES (?)", ((k,) for k in source_keys)
        )
        self._bump_generation(conn)

    def _after_removal(self, content_hashes: set[str]) -> None:
        """Finish a removal outside the transaction: lexical documents, then unshared originals."""
        self._collect_lexical_garbage()
        super()._after_removal(content_hashes)

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

    # vectors ---------------------------------------------------------------------------------
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
