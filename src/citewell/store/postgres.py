"""The scale-out store: PostgreSQL (with pgvector) for everything but the original files, which
stay in a blob folder shared by every server process.

Everything is in the database and every search is one SQL statement (postgres_search.py), so any
number of server processes can share one store: no index in memory has to be kept in step. A
source is written in one transaction, with its pages, chunks, vectors and its share of BM25's
statistics: after a crash it is either fully there or absent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, LiteralString

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.rows import DictRow, dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

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
    ScoreBreakdown,
    Source,
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
from citewell.store.objects import FolderObjects
from citewell.store.postgres_schema import migrate, schema_lock
from citewell.store.postgres_search import ChunkTerms, Search, chunk_terms, count_terms

__all__ = ["PostgresStore"]

Connection = psycopg.Connection[DictRow]

_SOURCE_COLUMNS = (
    "s.id, b.id AS bucket_id, s.filename, s.mime_type, s.content_hash, s.byte_size, s.version,"
    " s.supersedes, s.superseded_by, s.title, s.language, s.modality, s.page_count,"
    " s.char_count, s.chunk_count, s.effective_date, s.acl, s.metadata, s.created_at"
)
_CHUNK_COLUMNS = (
    "c.id, s.id AS source_id, c.idx, c.start_offset, c.end_offset, c.heading_path,"
    " c.page_numbers, c.sentences, c.language,"
    " substr(s.text, c.start_offset + 1, c.end_offset - c.start_offset) AS text"
)
_KEY_COLUMNS = "id, tenant_id, name, permissions, bucket_ids, acl_labels, created_at, revoked_at"
_JOB_COLUMNS = (
    "id, tenant_id, bucket_id, filename, mime_type, content_hash, byte_size, acl, metadata,"
    " effective_date, state, attempts, pages_done, pages_total, result_id, error, unreadable,"
    " created_at"
)
_FORGET_OLD_JOBS: LiteralString = (
    "DELETE FROM ingest_jobs WHERE state IN ('done', 'failed') AND id NOT IN (SELECT id FROM"
    " ingest_jobs WHERE state IN ('done', 'failed') ORDER BY updated_at DESC LIMIT %s)"
)
_HELD: LiteralString = (
    "SELECT 1 FROM sources WHERE content_hash = %s UNION ALL SELECT 1 FROM ingest_jobs"
    " WHERE content_hash = %s AND state IN ('queued', 'running') LIMIT 1"
)
"""Whether a source, or a job under way, holds an original (which is then kept)."""


@contextmanager
def _store_errors() -> Iterator[None]:
    """The one place where psycopg's exceptions become citewell's."""
    try:
        yield
    except psycopg.errors.IntegrityError as exc:
        raise Conflict(f"the store refused a conflicting write: {exc}") from exc
    except psycopg.Error as exc:  # the pool's PoolTimeout is one too
        raise StoreError(f"the PostgreSQL store failed: {exc}") from exc


class PostgresStore:
    """A Store in a PostgreSQL database (with pgvector), originals in ``blobs`` (by default
    ``folder/blobs``).

    ``connections``: most connections this process opens; ``ef_search``: HNSW's candidate list,
    the recall of dense search against its speed; ``exact_below``: scopes of fewer chunks are
    searched exactly, larger ones through the HNSW index.
    """

    def __init__(
        self,
        url: str,
        folder: Path,
        *,
        embedder: str,
        dim: int,
        connections: int = 8,
        ef_search: int = 100,
        exact_below: int = 2000,
        trace_retention_days: int = 30,
        answer_retention_days: int = 30,
        blobs: BlobStore | None = None,
    ) -> None:
        if min(trace_retention_days, answer_retention_days) < 0:
            raise ValueError("retention days must be >= 0")
        self.embedder = embedder
        self.dim = dim
        self.trace_retention_days = trace_retention_days
        self.answer_retention_days = answer_retention_days
        self.blobs = blobs or BlobStore(FolderObjects(folder / "blobs"))
        self.blobs.sweep_temporary()
        self._ef_search = ef_search
        self._exact_below = exact_below
        with _store_errors(), psycopg.connect(url, autocommit=True) as conn:
            migrate(conn)
            self._ensure_vector_index(conn)
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            connection_class=Connection,
            kwargs={"autocommit": True, "row_factory": dict_row},
            min_size=1,
            max_size=connections,
            configure=self._configure,
            open=False,
        )
        with _store_errors():
            self._pool.open(wait=True)
        self._purge_traces()
        self._purge_answers()

    # connections and transactions -----------------------------------------------------------
    def _ensure_vector_index(self, conn: psycopg.Connection[Any]) -> None:
        """One HNSW index (cosine) per embedder, over its vectors only."""
        digest = hashlib.sha256(self.embedder.encode()).hexdigest()[:16]
        with conn.transaction():
            schema_lock(conn)
            conn.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {} ON vectors USING hnsw"
                    " ((vector::vector({})) vector_cosine_ops) WHERE embedder = {}"
                ).format(
                    sql.Identifier(f"vectors_hnsw_{digest}_{self.dim}"),
                    sql.Literal(self.dim),
                    sql.Literal(self.embedder),
                )
            )

    def _configure(self, conn: Connection) -> None:
        register_vector(conn)
        conn.execute("SET TIME ZONE 'UTC'")
        # Filtered dense searches keep scanning the graph until their limit is filled, in
        # exact distance order.
        conn.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', false)")
        conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(self._ef_search),))

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A connection in a transaction that commits when the block ends (for bulk copies,
        ``store/migrate.py``); psycopg's errors become citewell's."""
        with _store_errors(), self._pool.connection() as conn, conn.transaction():
            yield conn

    def _read(
        self, query: sql.Composed | LiteralString, params: Any = (), *, search: Search | None = None
    ) -> list[DictRow]:
        """The rows of one statement. A search is first steered (``Search.steer``), in the same
        transaction and the same network round trip (a pipeline)."""
        with _store_errors(), self._pool.connection() as conn:
            if search is None:
                return conn.execute(query, params).fetchall()
            with conn.pipeline(), conn.transaction():
                # Never prepared: a plan kept from an earlier statement would ignore the steering,
                # and a generic plan (made after five runs) cannot see which terms are rare.
                conn.execute(search.steer(self._exact_below), params, prepare=False)
                cursor = conn.execute(query, params, prepare=False)
            return cursor.fetchall()

    def close(self) -> None:
        self._pool.close()

    # buckets ---------------------------------------------------------------------------------
    def create_bucket(self, slug: str, *, tenant_id: str, name: str | None = None) -> Bucket:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO buckets (id, tenant_id, slug, name, created_at)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tenant_id, slug) DO NOTHING",
                (new_id("bkt"), tenant_id, slug, name or slug, datetime.now(UTC)),
            )
        return self.get_bucket(slug, tenant_id=tenant_id)

    def get_bucket(self, id_or_slug: str, *, tenant_id: str) -> Bucket:
        rows = self._read(
            "SELECT id, tenant_id, slug, name, created_at FROM buckets"
            " WHERE tenant_id = %s AND (id = %s OR slug = %s)",
            (tenant_id, id_or_slug, id_or_slug),
        )
        if not rows:
            raise NotFound(f"no bucket '{id_or_slug}'", param="bucket")
        return Bucket.model_validate(rows[0])

    def list_buckets(self, *, tenant_id: str) -> list[Bucket]:
        rows = self._read(
            "SELECT id, tenant_id, slug, name, created_at FROM buckets WHERE tenant_id = %s"
            ' ORDER BY slug COLLATE "C"',
            (tenant_id,),
        )
        return [Bucket.model_validate(row) for row in rows]

    def rename_bucket(
        self, bucket_id: str, *, slug: str | None = None, name: str | None = None
    ) -> Bucket:
        with self.transaction() as conn:
            row = conn.execute(
                "SELECT tenant_id, slug, name FROM buckets WHERE id = %s FOR UPDATE", (bucket_id,)
            ).fetchone()
            if row is None:
                raise NotFound(f"no bucket '{bucket_id}'", param="bucket")
            taken = conn.execute(
                "SELECT 1 FROM buckets WHERE tenant_id = %s AND slug = %s AND id != %s",
                (row["tenant_id"], slug, bucket_id),
            ).fetchone()
            if taken is not None:
                raise Conflict(f"a bucket with slug '{slug}' already exists", param="slug")
            conn.execute(
                "UPDATE buckets SET slug = %s, name = %s WHERE id = %s",
                (slug or row["slug"], row["name"] if name is None else name, bucket_id),
            )
        return self.get_bucket(bucket_id, tenant_id=row["tenant_id"])

    def delete_bucket(self, bucket_id: str) -> None:
        with self.transaction() as conn:
            rows = conn.execute(
                "SELECT s.key, s.content_hash FROM sources s JOIN buckets b ON b.key = s.bucket_key"
                " WHERE b.id = %s FOR UPDATE OF s",
                (bucket_id,),
            ).fetchall()
            self._forget_sources(conn, [row["key"] for row in rows])
            if conn.execute("DELETE FROM buckets WHERE id = %s", (bucket_id,)).rowcount == 0:
                raise NotFound(f"no bucket '{bucket_id}'", param="bucket")
        self._after_removal({row["content_hash"] for row in rows})

    # sources ---------------------------------------------------------------------------------
    def find_source(self, bucket_id: str, content_hash: str) -> Source | None:
        rows = self._read(
            f"SELECT {_SOURCE_COLUMNS} FROM sources s JOIN buckets b ON b.key = s.bucket_key"
            " WHERE b.id = %s AND s.content_hash = %s",
            (bucket_id, content_hash),
        )
        return _source(rows[0]) if rows else None

    def add_source(self, draft: SourceDraft) -> Source:
        if len(draft.vectors) != len(draft.chunks) or len(draft.vector_keys) != len(draft.chunks):
            raise ValueError("one vector and one vector key per chunk are required")
        # The original first, so that a committed source always has it.
        self.blobs.put(draft.content, draft.content_hash)
        source_id = draft.id or new_source_id()
        try:
            with self.transaction() as conn:
                self._insert(conn, source_id, draft)
        except BaseException:
            self._after_removal({draft.content_hash})
            raise
        # Again: a source deleted meanwhile elsewhere may have taken the shared original away
        # between the first put and the commit (a no-op when it is there).
        self.blobs.put(draft.content, draft.content_hash)
        return self.get_source(source_id)

    def _insert(self, conn: Connection, source_id: str, draft: SourceDraft) -> None:
        bucket = conn.execute(
            "SELECT key FROM buckets WHERE id = %s", (draft.bucket_id,)
        ).fetchone()
        if bucket is None:
            raise NotFound(f"no bucket '{draft.bucket_id}'", param="bucket")
        duplicate = conn.execute(
            "SELECT id FROM sources WHERE bucket_key = %s AND content_hash = %s",
            (bucket["key"], draft.content_hash),
        ).fetchone()
        if duplicate is not None:
            raise Conflict(f"the bucket already holds these bytes as source {duplicate['id']}")
        row = conn.execute(
            "INSERT INTO sources (id, bucket_key, filename, mime_type, content_hash, byte_size,"
            " version, title, language, modality, page_count, char_count, chunk_count,"
            " effective_date, acl, metadata, created_at, text)"
            " VALUES (%s, %s, %s, %s, %s, %s, 0, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " RETURNING key",
            (
                source_id,
                bucket["key"],
                draft.filename,
                draft.mime_type,
                draft.content_hash,
                len(draft.content),
                draft.title,
                draft.language,
                draft.modality.value,
                len(draft.pages) or None,
                len(draft.text),
                len(draft.chunks),
                draft.effective_date,
                sorted(draft.acl),
                Jsonb(draft.metadata),
                datetime.now(UTC),
                draft.text,
            ),
        ).fetchone()
        assert row is not None
        source_key = row["key"]
        confidences = draft.char_confidences or [None] * len(draft.pages)
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO pages (source_key, number, label, start_offset, end_offset, width,"
                " height, modality, boxes, ocr_confidence, confidences)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [
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
                ],
            )
            lexical = [
                chunk_terms(draft.text[chunk.span.start : chunk.span.end], chunk.language)
                for chunk in draft.chunks
            ]
            cursor.executemany(
                "INSERT INTO chunks (id, source_key, idx, start_offset, end_offset, heading_path,"
                " page_numbers, sentences, language, vector_key, lexical_field, lexemes,"
                " lexical_length)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::tsvector, %s)",
                [
                    (
                        chunk_id(source_id, index),
                        source_key,
                        index,
                        chunk.span.start,
                        chunk.span.end,
                        Jsonb(list(chunk.heading_path)),
                        Jsonb(list(chunk.page_numbers)),
                        Jsonb([[s.start, s.end] for s in chunk.sentences]),
                        chunk.language,
                        key,
                        terms.field,
                        terms.tsvector(),
                        terms.length,
                    )
                    for index, (chunk, key, terms) in enumerate(
                        zip(draft.chunks, draft.vector_keys, lexical, strict=True)
                    )
                ],
            )
        self._insert_vectors(conn, draft.embedder, draft.vector_keys, draft.vectors)
        self._link_version(conn, source_key, bucket["key"], draft.filename)
        # Last, as these rows are shared by every write: their locks are held the shortest.
        count_terms(conn, lexical, sign=1)

    @staticmethod
    def _link_version(conn: Connection, source_key: int, bucket_key: int, filename: str) -> None:
        """Make the new source the current version of its filename."""
        # Two writers of one filename take turns here, so versions never fork.
        conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{bucket_key}/{filename}",)
        )
        previous = conn.execute(
            "SELECT key, id, version FROM sources WHERE bucket_key = %s AND filename = %s"
            " AND superseded_by IS NULL AND key != %s FOR UPDATE",
            (bucket_key, filename, source_key),
        ).fetchone()
        new = conn.execute(
            "UPDATE sources SET version = %s, supersedes = %s WHERE key = %s RETURNING id",
            (
                previous["version"] + 1 if previous else 1,
                previous["id"] if previous else None,
                source_key,
            ),
        ).fetchone()
        if previous is not None and new is not None:
            conn.execute(
                "UPDATE sources SET superseded_by = %s WHERE key = %s", (new["id"], previous["key"])
            )

    @staticmethod
    def _insert_vectors(
        conn: Connection, embedder: str, keys: Sequence[str], vectors: Vectors
    ) -> None:
        rows = {
            key: np.ascontiguousarray(vector, dtype=np.float32)
            for key, vector in zip(keys, vectors, strict=True)
        }
        with conn.cursor() as cursor:
            # In key order: two writers of the same texts wait for each other, never deadlock.
            cursor.executemany(
                "INSERT INTO vectors (embedder, vector_key, vector) VALUES (%s, %s, %s)"
                " ON CONFLICT DO NOTHING",
                [(embedder, key, rows[key]) for key in sorted(rows)],
            )

    def get_source(self, source_id: str) -> Source:
        source = self.get_sources([source_id]).get(source_id)
        if source is None:
            raise NotFound(f"no source '{source_id}'", param="source_id")
        return source

    def get_sources(self, source_ids: Iterable[str]) -> dict[str, Source]:
        rows = self._read(
            f"SELECT {_SOURCE_COLUMNS} FROM sources s JOIN buckets b ON b.key = s.bucket_key"
            " WHERE s.id = ANY(%s)",
            (list(dict.fromkeys(source_ids)),),
        )
        return {row["id"]: _source(row) for row in rows}

    def list_sources(self, bucket_id: str, *, include_superseded: bool = False) -> list[Source]:
        current: LiteralString = "" if include_superseded else " AND s.superseded_by IS NULL"
        rows = self._read(
            f"SELECT {_SOURCE_COLUMNS} FROM sources s JOIN buckets b ON b.key = s.bucket_key"
            f' WHERE b.id = %s{current} ORDER BY s.filename COLLATE "C", s.version',
            (bucket_id,),
        )
        return [_source(row) for row in rows]

    def delete_source(self, source_id: str) -> None:
        with self.transaction() as conn:
            row = conn.execute(
                "SELECT key, content_hash, supersedes, superseded_by FROM sources"
                " WHERE id = %s FOR UPDATE",
                (source_id,),
            ).fetchone()
            if row is None:
                raise NotFound(f"no source '{source_id}'", param="source_id")
            # Close the gap in the version chain; deleting the newest makes the previous current.
            conn.execute(
                "UPDATE sources SET superseded_by = %s WHERE id = %s",
                (row["superseded_by"], row["supersedes"]),
            )
            conn.execute(
                "UPDATE sources SET supersedes = %s WHERE id = %s",
                (row["supersedes"], row["superseded_by"]),
            )
            self._forget_sources(conn, [row["key"]])
        self._after_removal({row["content_hash"]})

    @staticmethod
    def _forget_sources(conn: Connection, source_keys: Sequence[int]) -> None:
        """Delete sources with what is derived from them and the answers quoting them."""
        if not source_keys:
            return
        keys = list(source_keys)
        vector_keys = [
            row["vector_key"]
            for row in conn.execute(
                "SELECT DISTINCT vector_key FROM chunks WHERE source_key = ANY(%s)", (keys,)
            )
        ]
        counted = [
            ChunkTerms.stored(row["lexical_field"], row["lexemes"], row["lexical_length"])
            for row in conn.execute(
                "SELECT lexical_field, tsvector_to_array(lexemes) AS lexemes, lexical_length"
                " FROM chunks WHERE source_key = ANY(%s)",
                (keys,),
            )
        ]
        conn.execute(
            "DELETE FROM answers WHERE id IN (SELECT a.response_id FROM answer_sources a"
            " JOIN sources s ON s.id = a.source_id WHERE s.key = ANY(%s))",
            (keys,),
        )
        conn.execute("DELETE FROM sources WHERE key = ANY(%s)", (keys,))
        conn.execute(
            "DELETE FROM vectors WHERE vector_key = ANY(%s) AND NOT EXISTS"
            " (SELECT 1 FROM chunks c WHERE c.vector_key = vectors.vector_key)",
            (vector_keys,),
        )
        count_terms(conn, counted, sign=-1)

    def _after_removal(self, content_hashes: set[str]) -> None:
        """Delete the originals no source, nor job under way, holds any more."""
        for digest in content_hashes:
            if not self._read(_HELD, (digest, digest)):
                self.blobs.delete(digest)

    # text, pages, originals -----------------------------------------------------------------
    def source_text(self, source_id: str) -> str:
        rows = self._read("SELECT text FROM sources WHERE id = %s", (source_id,))
        if not rows:
            raise NotFound(f"no source '{source_id}'", param="source_id")
        return str(rows[0]["text"])

    def source_pages(self, source_id: str) -> tuple[Page, ...]:
        rows = self._read(
            "SELECT p.number, p.label, p.start_offset, p.end_offset, p.width, p.height,"
            " p.modality, p.ocr_confidence FROM pages p JOIN sources s ON s.key = p.source_key"
            " WHERE s.id = %s ORDER BY p.number",
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

    def _page_column(self, column: LiteralString, source_id: str, page_number: int) -> Any:
        rows = self._read(
            f"SELECT p.{column} FROM pages p JOIN sources s ON s.key = p.source_key"
            " WHERE s.id = %s AND p.number = %s",
            (source_id, page_number),
        )
        if not rows:
            raise NotFound(f"no page {page_number} in source '{source_id}'", param="page")
        return rows[0][column]

    def char_boxes(self, source_id: str, page_number: int) -> CharBoxes:
        return unpack_boxes(self._page_column("boxes", source_id, page_number))

    def char_confidences(self, source_id: str, page_number: int) -> CharConfidences:
        return unpack_confidences(self._page_column("confidences", source_id, page_number))

    def original(self, source_id: str) -> bytes:
        return self.blobs.get(self.get_source(source_id).content_hash)

    def get_chunks(self, chunk_ids: Sequence[str]) -> dict[str, Chunk]:
        rows = self._read(
            f"SELECT {_CHUNK_COLUMNS} FROM chunks c JOIN sources s ON s.key = c.source_key"
            " WHERE c.id = ANY(%s)",
            (list(dict.fromkeys(chunk_ids)),),
        )
        return {row["id"]: _chunk(row) for row in rows}

    # vectors ---------------------------------------------------------------------------------
    def cached_vectors(self, embedder: str, keys: Sequence[str]) -> dict[str, Vectors]:
        rows = self._read(
            "SELECT vector_key, vector FROM vectors WHERE embedder = %s AND vector_key = ANY(%s)",
            (embedder, list(dict.fromkeys(keys))),
        )
        return {
            row["vector_key"]: row["vector"].to_numpy().astype(np.float32, copy=False)
            for row in rows
        }

    def chunks_without_vectors(self, embedder: str, *, limit: int) -> list[tuple[str, Chunk]]:
        rows = self._read(
            f"SELECT DISTINCT ON (c.vector_key) c.vector_key, {_CHUNK_COLUMNS} FROM chunks c"
            " JOIN sources s ON s.key = c.source_key WHERE NOT EXISTS (SELECT 1 FROM vectors v"
            " WHERE v.embedder = %s AND v.vector_key = c.vector_key)"
            " ORDER BY c.vector_key, c.key LIMIT %s",
            (embedder, limit),
        )
        return [(row["vector_key"], _chunk(row)) for row in rows]

    def put_vectors(self, embedder: str, keys: Sequence[str], vectors: Vectors) -> None:
        with self.transaction() as conn:
            self._insert_vectors(conn, embedder, keys, vectors)

    # ingest jobs -----------------------------------------------------------------------------
    # Lease times are the database's clock (now()), the one clock every server shares.
    def add_job(self, job: IngestJob, content: bytes, *, owner: str, lease_seconds: float) -> None:
        self.blobs.put(content, job.content_hash)
        with self.transaction() as conn:
            conn.execute(
                f"INSERT INTO ingest_jobs ({_JOB_COLUMNS}, lease_owner, lease_expires, updated_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, NULL, NULL,"
                " false, %s, %s, now() + make_interval(secs => %s), now())",
                (
                    job.source_id,
                    job.tenant_id,
                    job.bucket_id,
                    job.filename,
                    job.mime_type,
                    job.content_hash,
                    job.byte_size,
                    sorted(job.acl),
                    Jsonb(job.metadata),
                    job.effective_date,
                    JobState.RUNNING.value,
                    job.attempts,
                    job.pages_done,
                    job.pages_total,
                    job.created_at,
                    owner,
                    lease_seconds,
                ),
            )
        # Again: a failed job elsewhere may have taken the shared bytes away meanwhile.
        self.blobs.put(content, job.content_hash)

    def get_job(self, job_id: str) -> IngestJob:
        rows = self._read(f"SELECT {_JOB_COLUMNS} FROM ingest_jobs WHERE id = %s", (job_id,))
        if not rows:
            raise NotFound(f"no source '{job_id}'", param="source_id")
        return _job(rows[0])

    def list_jobs(self, bucket_id: str) -> list[IngestJob]:
        rows = self._read(
            f"SELECT {_JOB_COLUMNS} FROM ingest_jobs WHERE bucket_id = %s ORDER BY created_at, id",
            (bucket_id,),
        )
        return [_job(row) for row in rows]

    def find_job(self, bucket_id: str, content_hash: str) -> IngestJob | None:
        rows = self._read(
            f"SELECT {_JOB_COLUMNS} FROM ingest_jobs WHERE bucket_id = %s AND content_hash = %s"
            " AND state IN ('queued', 'running') ORDER BY created_at LIMIT 1",
            (bucket_id, content_hash),
        )
        return _job(rows[0]) if rows else None

    def job_content(self, job_id: str) -> bytes:
        return self.blobs.get(self.get_job(job_id).content_hash)

    def claim_job(self, *, owner: str, lease_seconds: float, max_attempts: int) -> IngestJob | None:
        takeable = "(state = 'queued' OR (state = 'running' AND lease_expires < now()))"
        with self.transaction() as conn:
            exhausted = conn.execute(
                "UPDATE ingest_jobs SET state = 'failed', error = %s, lease_owner = NULL,"
                f" lease_expires = NULL, updated_at = now() WHERE {takeable} AND attempts >= %s"
                " RETURNING content_hash",
                (job_interrupted(max_attempts), max_attempts),
            ).fetchall()
            # SKIP LOCKED: concurrent claimers each lock a different job, and a job another
            # claims meanwhile is looked at again (it is running, with a lease: not takeable).
            row = conn.execute(
                "UPDATE ingest_jobs SET state = 'running', attempts = attempts + 1,"
                " lease_owner = %s, lease_expires = now() + make_interval(secs => %s),"
                " updated_at = now() WHERE id = (SELECT id FROM ingest_jobs"
                f" WHERE {takeable} ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)"
                f" RETURNING {_JOB_COLUMNS}",
                (owner, lease_seconds),
            ).fetchone()
        self._after_removal({r["content_hash"] for r in exhausted})
        return None if row is None else _job(row)

    def renew_jobs(self, *, owner: str, lease_seconds: float) -> None:
        with self.transaction() as conn:
            conn.execute(
                "UPDATE ingest_jobs SET lease_expires = now() + make_interval(secs => %s)"
                " WHERE lease_owner = %s AND state = 'running'",
                (lease_seconds, owner),
            )

    def job_progress(self, job_id: str, *, owner: str, done: int, total: int) -> None:
        with self.transaction() as conn:
            conn.execute(
                "UPDATE ingest_jobs SET pages_done = %s, pages_total = %s, updated_at = now()"
                " WHERE id = %s AND lease_owner = %s AND state = 'running'",
                (done, total, job_id, owner),
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
        with self.transaction() as conn:
            row = conn.execute(
                "UPDATE ingest_jobs SET state = %s, result_id = %s, error = %s, unreadable = %s,"
                " lease_owner = NULL, lease_expires = NULL, updated_at = now()"
                " WHERE id = %s AND lease_owner = %s AND state = 'running' RETURNING content_hash",
                (state.value, result_id, error, unreadable, job_id, owner),
            ).fetchone()
            conn.execute(_FORGET_OLD_JOBS, (KEPT_FINISHED,))
        if row is not None and error is not None:
            self._after_removal({row["content_hash"]})

    def release_jobs(self, *, owner: str) -> None:
        with self.transaction() as conn:
            conn.execute(
                "UPDATE ingest_jobs SET state = 'queued', attempts = attempts - 1,"
                " lease_owner = NULL, lease_expires = NULL WHERE lease_owner = %s"
                " AND state = 'running'",
                (owner,),
            )

    def delete_job(self, job_id: str) -> None:
        with self.transaction() as conn:
            deleted = conn.execute(
                "DELETE FROM ingest_jobs WHERE id = %s AND state IN ('done', 'failed')", (job_id,)
            ).rowcount
        if not deleted:
            raise job_under_way(self.get_job(job_id).source_id)

    # search ----------------------------------------------------------------------------------
    def search_lexical(self, query: str, scope: Scope, *, limit: int) -> list[ChunkHit]:
        search = self._search(scope, query=query)
        if limit <= 0 or not search.lexemes or search.nothing_allowed:
            return []
        rows = self._read(
            sql.SQL("WITH {}, {} SELECT id, score FROM lexical").format(
                search.allowed, search.lexical(limit)
            ),
            search.params,
            search=search,
        )
        return [ChunkHit(row["id"], row["score"]) for row in rows]

    def search_dense(self, vector: Vectors, scope: Scope, *, limit: int) -> list[ChunkHit]:
        search = self._search(scope, vector=vector)
        if limit <= 0 or search.nothing_allowed:
            return []
        rows = self._read(
            sql.SQL(
                'WITH {}, {} SELECT id, score FROM dense ORDER BY distance, id COLLATE "C"'
            ).format(search.allowed, search.dense(limit)),
            search.params,
            search=search,
        )
        return [ChunkHit(row["id"], row["score"]) for row in rows]

    def search_hybrid(
        self, query: str, vector: Vectors, scope: Scope, *, limit: int, fusion: Fusion
    ) -> list[FusedHit]:
        search = self._search(scope, query=query, vector=vector)
        if limit <= 0 or search.nothing_allowed:
            return []
        return [
            FusedHit(
                row["id"],
                ScoreBreakdown(
                    fused=row["fused"],
                    lexical=row["lexical"],
                    lexical_rank=row["lexical_rank"],
                    dense=row["dense"],
                    dense_rank=row["dense_rank"],
                ),
            )
            for row in self._read(search.hybrid(fusion, limit), search.params, search=search)
        ]

    def _search(self, scope: Scope, *, query: str = "", vector: Vectors | None = None) -> Search:
        return Search(scope, query=query, vector=vector, embedder=self.embedder, dim=self.dim)

    # answers ---------------------------------------------------------------------------------
    def put_answer(self, stored: StoredAnswer) -> None:
        self._purge_answers()
        if self.answer_retention_days == 0:
            return
        with self.transaction() as conn:
            if (
                stored.previous_id is not None
                and not conn.execute(
                    "SELECT 1 FROM answers WHERE id = %s FOR SHARE", (stored.previous_id,)
                ).fetchone()
            ):
                # The answer it continues was deleted with a source while this one was made:
                # its conversation quotes that source's text.
                return
            conn.execute(
                "INSERT INTO answers (id, tenant_id, answer_id, created_at, answer, conversation,"
                " rendered, previous_id, key_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    stored.id,
                    stored.tenant_id,
                    stored.answer.id,
                    datetime.now(UTC),
                    stored.answer.model_dump_json(),
                    Jsonb([list(turn) for turn in stored.conversation]),
                    stored.rendered,
                    stored.previous_id,
                    stored.key_id,
                ),
            )
            conn.execute(
                "INSERT INTO answer_sources (source_id, response_id)"
                " SELECT unnest(%s::text[]), %s"
                " UNION SELECT source_id, %s FROM answer_sources WHERE response_id = %s",
                (
                    sorted(sources_quoted(stored.answer)),
                    stored.id,
                    stored.id,
                    stored.previous_id,
                ),
            )

    def get_answer(self, answer_id: str, *, tenant_id: str) -> StoredAnswer:
        rows = self._read(
            "SELECT id, tenant_id, answer, conversation, rendered, previous_id, key_id"
            " FROM answers WHERE id = %s AND tenant_id = %s",
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
            conversation=tuple((role, text) for role, text in row["conversation"]),
            previous_id=row["previous_id"],
            key_id=row["key_id"],
        )

    def _purge_answers(self) -> None:
        """Drop the stored answers older than the retention (with what they quote)."""
        cutoff = datetime.now(UTC) - timedelta(days=self.answer_retention_days)
        with self.transaction() as conn:
            conn.execute("DELETE FROM answers WHERE created_at < %s", (cutoff,))

    # traces ----------------------------------------------------------------------------------
    def put_trace(self, stored: StoredTrace) -> None:
        if stored.created_at.tzinfo is None:
            raise ValueError("a trace's time must be timezone-aware")
        with self.transaction() as conn:
            if self.trace_retention_days > 0:
                conn.execute(
                    "INSERT INTO traces (answer_id, agent, created_at, trace)"
                    " VALUES (%s, %s, %s, %s) ON CONFLICT (answer_id) DO UPDATE SET"
                    " agent = excluded.agent, created_at = excluded.created_at,"
                    " trace = excluded.trace",
                    (
                        stored.answer_id,
                        stored.agent,
                        stored.created_at,
                        stored.trace.model_dump_json(),
                    ),
                )
            conn.execute("DELETE FROM traces WHERE created_at < %s", (self._trace_cutoff(),))

    def list_traces(self) -> list[StoredTrace]:
        rows = self._read(
            "SELECT answer_id, agent, created_at, trace FROM traces"
            ' ORDER BY created_at, answer_id COLLATE "C"'
        )
        return [
            StoredTrace(
                answer_id=row["answer_id"],
                agent=row["agent"],
                created_at=row["created_at"],
                trace=Trace.model_validate_json(row["trace"]),
            )
            for row in rows
        ]

    def _trace_cutoff(self) -> datetime:
        return datetime.now(UTC) - timedelta(days=self.trace_retention_days)

    def _purge_traces(self) -> None:
        """Drop the traces older than the retention (all of them for 0 days)."""
        with self.transaction() as conn:
            conn.execute("DELETE FROM traces WHERE created_at < %s", (self._trace_cutoff(),))

    # tenants and keys ------------------------------------------------------------------------
    def create_tenant(self, name: str) -> Tenant:
        tenant = Tenant(id=new_id("ten"), name=name, created_at=datetime.now(UTC))
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO tenants (id, name, created_at) VALUES (%s, %s, %s)",
                (tenant.id, tenant.name, tenant.created_at),
            )
        return tenant

    def get_tenant(self, tenant_id: str) -> Tenant:
        rows = self._read("SELECT id, name, created_at FROM tenants WHERE id = %s", (tenant_id,))
        if not rows:
            raise NotFound(f"No tenant found with id '{tenant_id}'.", param="tenant_id")
        return Tenant.model_validate(rows[0])

    def list_tenants(self) -> list[Tenant]:
        rows = self._read(
            "SELECT id, name, created_at FROM tenants"
            " ORDER BY id != 'default', created_at, id COLLATE \"C\""
        )
        return [Tenant.model_validate(row) for row in rows]

    def put_key(self, key: ApiKey, secret_hash: str) -> None:
        self.get_tenant(key.tenant_id)
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO api_keys (id, tenant_id, name, secret_hash, permissions, bucket_ids,"
                " acl_labels, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    key.id,
                    key.tenant_id,
                    key.name,
                    secret_hash,
                    sorted(key.permissions),
                    None if key.bucket_ids is None else sorted(key.bucket_ids),
                    None if key.acl_labels is None else sorted(key.acl_labels),
                    key.created_at,
                ),
            )

    def get_key(self, key_id: str) -> tuple[ApiKey, str]:
        rows = self._read(
            f"SELECT {_KEY_COLUMNS}, secret_hash FROM api_keys WHERE id = %s", (key_id,)
        )
        if not rows:
            raise NotFound(f"No API key found with id '{key_id}'.", param="key_id")
        return _api_key(rows[0]), rows[0]["secret_hash"]

    def list_keys(self, tenant_id: str) -> list[ApiKey]:
        rows = self._read(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE tenant_id = %s"
            ' ORDER BY created_at, id COLLATE "C"',
            (tenant_id,),
        )
        return [_api_key(row) for row in rows]

    def revoke_key(self, key_id: str, *, tenant_id: str) -> ApiKey:
        with self.transaction() as conn:
            conn.execute(
                "UPDATE api_keys SET revoked_at = %s WHERE id = %s AND tenant_id = %s"
                " AND revoked_at IS NULL",
                (datetime.now(UTC), key_id, tenant_id),
            )
        key, _ = self.get_key(key_id)
        if key.tenant_id != tenant_id:
            raise NotFound(f"No API key found with id '{key_id}'.", param="key_id")
        return key

    # agents ----------------------------------------------------------------------------------
    def put_agent(self, agent: Agent, *, tenant_id: str) -> None:
        self.get_tenant(tenant_id)
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO agents (tenant_id, name, agent, created_at)"
                " VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (tenant_id, name) DO UPDATE SET agent = excluded.agent",
                (tenant_id, agent.name, agent.model_dump_json(), datetime.now(UTC)),
            )

    def list_agents(self, *, tenant_id: str) -> list[Agent]:
        rows = self._read(
            'SELECT agent FROM agents WHERE tenant_id = %s ORDER BY created_at, name COLLATE "C"',
            (tenant_id,),
        )
        return [Agent.model_validate_json(row["agent"]) for row in rows]

    def delete_agent(self, name: str, *, tenant_id: str) -> None:
        with self.transaction() as conn:
            deleted = conn.execute(
                "DELETE FROM agents WHERE tenant_id = %s AND name = %s", (tenant_id, name)
            ).rowcount
        if not deleted:
            raise NotFound(f"No agent named '{name}'.", param="name")


# rows ----------------------------------------------------------------------------------------
def _source(row: DictRow) -> Source:
    return Source.model_validate(row)


def _chunk(row: DictRow) -> Chunk:
    return Chunk(
        id=row["id"],
        source_id=row["source_id"],
        index=row["idx"],
        span=Span(start=row["start_offset"], end=row["end_offset"]),
        text=row["text"],
        heading_path=tuple(row["heading_path"]),
        page_numbers=tuple(row["page_numbers"]),
        sentences=tuple(Span(start=a, end=b) for a, b in row["sentences"]),
        language=row["language"],
    )


def _api_key(row: DictRow) -> ApiKey:
    return ApiKey(
        id=row["id"],
        tenant_id=row["tenant_id"],
        name=row["name"],
        permissions=frozenset(Permission(p) for p in row["permissions"]),
        bucket_ids=None if row["bucket_ids"] is None else frozenset(row["bucket_ids"]),
        acl_labels=None if row["acl_labels"] is None else frozenset(row["acl_labels"]),
        created_at=row["created_at"],
        revoked_at=row["revoked_at"],
    )


def _job(row: DictRow) -> IngestJob:
    return IngestJob(
        source_id=row["id"],
        tenant_id=row["tenant_id"],
        bucket_id=row["bucket_id"],
        filename=row["filename"],
        mime_type=row["mime_type"],
        content_hash=row["content_hash"],
        byte_size=row["byte_size"],
        acl=frozenset(row["acl"]),
        metadata=row["metadata"],
        effective_date=row["effective_date"],
        created_at=row["created_at"],
        state=JobState(row["state"]),
        attempts=row["attempts"],
        pages_done=row["pages_done"],
        pages_total=row["pages_total"],
        result_id=row["result_id"],
        error=row["error"],
        unreadable=row["unreadable"],
    )
