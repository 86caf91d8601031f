"""The scale-out store: PostgreSQL (with pgvector) for everything but the original files, which
stay in a blob folder shared by every server process.

Everything is in the database and every search is one SQL statement (postgres_search.py), so any
number of server processes can share one store: no index in memory has to be kept in step. A
source is written in one transaction, with its pages, chunks, vectors and its share of BM25's
statistics: after a crash it is either fully there or absent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, LiteralString

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.rows import DictRow, dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from citewell.model import ScoreBreakdown, Source
from citewell.store.base import ChunkHit, FusedHit, Fusion, Retention, Scope, SourceDraft, Vectors
from citewell.store.dialect import Clause, Dialect
from citewell.store.objects import FolderObjects
from citewell.store.objects.blobs import BlobStore
from citewell.store.postgres.schema import migrate, schema_lock
from citewell.store.postgres.search import (
    ChunkTerms,
    Search,
    add_postings,
    chunk_terms,
    count_terms,
    forget_postings,
    refresh_impacts,
)
from citewell.store.sql import CHUNK_ROW_COLUMNS, SqlStore, chunk_rows, page_rows, store_errors

__all__ = ["PostgresStore"]

Connection = psycopg.Connection[DictRow]


def _store_errors() -> AbstractContextManager[None]:
    # psycopg.Error includes the pool's PoolTimeout.
    return store_errors("PostgreSQL", psycopg.errors.IntegrityError, psycopg.Error)


class _PostgresDialect(Dialect):
    """PostgreSQL keeps times as timestamptz, labels as text[], JSON as jsonb; it locks the rows
    a transaction reads to write, and times leases by its own clock, the one every server
    shares."""

    mark = "%s"
    binary = ' COLLATE "C"'
    locks_rows = True
    each = "unnest(?::text[]) AS value"
    each_key = "unnest(?::bigint[]) AS value"

    def json_value(self, value: Any) -> Jsonb:
        return Jsonb(value)

    def read_vector(self, value: Any) -> Vectors:
        vector: Vectors = value.to_numpy().astype(np.float32, copy=False)
        return vector

    def now(self, moment: datetime) -> Clause:
        return Clause("now()")

    def later(self, moment: datetime, seconds: float) -> Clause:
        return Clause("now() + make_interval(secs => ?)", (seconds,))


EF_PER_RESULT = 4
"""HNSW candidates kept per vector asked for, at least: the graph walk keeps ``ef_search``
candidates, and a list nearly as long as that misses many of the true nearest (at 1M passages a
hybrid search's 100 nearest: recall 0.74 keeping 100, 0.91 keeping 400; docs/benchmarks.md)."""


class PostgresStore(SqlStore[Connection]):
    """A Store in a PostgreSQL database (with pgvector), originals in ``blobs`` (by default
    ``folder/blobs``).

    ``connections``: most connections this process opens; ``ef_search``: HNSW's candidate list,
    the recall of dense search against its speed; ``exact_below``: scopes of fewer chunks are
    searched exactly, larger ones through the HNSW index; ``lexical_depth``: the postings of each
    query term a lexical search reads (``lexical_share`` of the library's chunks, if more), and
    ``lexical_pool``: how many of the chunks they reach are scored exactly, the recall of
    lexical search against its speed (depth None: every chunk holding a query term is scored,
    exact BM25 at a cost that grows with the library; ``postgres.search``); ``index_memory`` and
    ``index_workers``: PostgreSQL's ``maintenance_work_mem`` and
    ``max_parallel_maintenance_workers`` while it builds an HNSW index.

    Connections hold no state between transactions (nothing is prepared on the server, every
    search sets what steers it inside its own transaction), so PgBouncer may pool them per
    transaction.
    """

    _dialect = _PostgresDialect()
    _stored = "true"

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
        lexical_depth: int | None = 2000,
        lexical_pool: int = 500,
        lexical_share: float = 0.005,
        index_memory: str = "1GB",
        index_workers: int = 2,
        retention: Retention = Retention(),
        blobs: BlobStore | None = None,
    ) -> None:
        self.embedder = embedder
        self.dim = dim
        self.retention = retention
        self.blobs = blobs or BlobStore(FolderObjects(folder / "blobs"))
        self.blobs.sweep_temporary()
        self._ef_search = ef_search
        self._exact_below = exact_below
        self._lexical_depth = lexical_depth
        self._lexical_pool = lexical_pool
        self._lexical_share = lexical_share
        self._index_memory = index_memory
        self._index_workers = index_workers
        with _store_errors(), psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
            migrate(conn)
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            connection_class=Connection,
            # Never prepared on the server: a prepared statement belongs to one server
            # connection, which a transaction pooler hands to another client next time.
            kwargs={"autocommit": True, "row_factory": dict_row, "prepare_threshold": None},
            min_size=1,
            max_size=connections,
            configure=self._configure,
            open=False,
        )
        with _store_errors():
            self._pool.open(wait=True)
        self._build_indexes()
        self._purge_traces()
        self._purge_answers()

    # connections and transactions -----------------------------------------------------------
    def _vector_index(self) -> sql.Identifier:
        """The embedder's HNSW index (cosine), over its vectors only."""
        digest = hashlib.sha256(self.embedder.encode()).hexdigest()[:16]
        return sql.Identifier(f"vectors_hnsw_{digest}_{self.dim}")

    def _build_indexes(self) -> None:
        """Build the embedder's HNSW index and the lexical postings' index unless they are there.

        Under the schema lock, so one process builds them while the others wait. Searches
        meanwhile plan without them (they are not committed yet): dense search scans exactly,
        lexical search reads every posting of each query term. Writes wait.
        """
        with self.transaction() as conn:
            schema_lock(conn)
            conn.execute(
                "SELECT set_config('maintenance_work_mem', %s, true),"
                " set_config('max_parallel_maintenance_workers', %s, true)",
                (self._index_memory, str(self._index_workers)),
            )
            conn.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {} ON vectors USING hnsw"
                    " ((vector::vector({})) vector_cosine_ops) WHERE embedder = {}"
                ).format(self._vector_index(), sql.Literal(self.dim), sql.Literal(self.embedder))
            )
            conn.execute(
                "CREATE INDEX IF NOT EXISTS lexical_postings_by_impact"
                " ON lexical_postings (term, impact DESC) INCLUDE (chunk_key, source_key)"
            )

    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Load many sources fast: the sources added during the block (``add_source``, as
        always) are written without the embedder's HNSW index and the lexical postings' index,
        which are built once at the end, as pgvector and PostgreSQL recommend (inserting into
        the graph and into the postings' B-tree row by row is what slows a large load).

        Until the indexes are built again, searches are slow, never wrong. Other processes may
        keep writing and searching; one that opens the store meanwhile builds the indexes at
        once, so start them after a large load.
        """
        with self.transaction() as conn:
            schema_lock(conn)
            conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(self._vector_index()))
            conn.execute("DROP INDEX IF EXISTS lexical_postings_by_impact")
        try:
            yield
        finally:
            self._build_indexes()

    def _configure(self, conn: Connection) -> None:
        register_vector(conn)
        # A parameter PgBouncer keeps per client, even when it pools transactions.
        conn.execute("SET TIME ZONE 'UTC'")

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A connection in a transaction that commits when the block ends (for bulk copies,
        ``store/postgres/migrate.py``); psycopg's errors become citewell's."""
        with _store_errors(), self._pool.connection() as conn, conn.transaction():
            yield conn

    def _write(self) -> AbstractContextManager[Connection]:
        """``transaction``, as the statements both stores share open one (``store/sql.py``)."""
        return self.transaction()

    def _read(
        self,
        query: sql.Composed | LiteralString,
        params: Any = (),
        *,
        search: Search | None = None,
        nearest: int = 0,
    ) -> list[DictRow]:
        """The rows of one statement. A search is first steered (``Search.steer``), in the same
        transaction and the same network round trip (a pipeline). Nothing is prepared (the
        pool's ``prepare_threshold``): a plan kept from an earlier statement would ignore the
        steering, and a generic plan cannot see which query terms are rare. A search for the
        ``nearest`` vectors keeps at least ``EF_PER_RESULT`` HNSW candidates for each."""
        with _store_errors(), self._pool.connection() as conn:
            if search is None:
                return conn.execute(query, params).fetchall()
            with conn.pipeline(), conn.transaction():
                ef_search = max(self._ef_search, EF_PER_RESULT * nearest)
                conn.execute(search.steer(self._exact_below, ef_search), params)
                cursor = conn.execute(query, params)
            return cursor.fetchall()

    def close(self) -> None:
        self._pool.close()

    # sources ---------------------------------------------------------------------------------
    def add_source(self, draft: SourceDraft) -> Source:
        if len(draft.vectors) != len(draft.chunks) or len(draft.vector_keys) != len(draft.chunks):
            raise ValueError("one vector and one vector key per chunk are required")
        # The original first, so that a committed source always has it.
        self.blobs.put(draft.content, draft.content_hash)
        source_id = draft.id
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
        source_key = self._insert_source(conn, source_id, draft)
        with conn.cursor() as cursor:
            # COPY: the fastest way in for many rows, pgvector's advice for bulk loads.
            with cursor.copy(
                "COPY pages (source_key, number, label, start_offset, end_offset, width, height,"
                " modality, boxes, ocr_confidence, confidences) FROM STDIN"
            ) as copy:
                for page_row in page_rows(source_key, draft):
                    copy.write_row(page_row)
            lexical = [
                chunk_terms(draft.text[chunk.span.start : chunk.span.end], chunk.language)
                for chunk in draft.chunks
            ]
            with cursor.copy(
                f"COPY chunks ({CHUNK_ROW_COLUMNS}, lexical_field, lexemes, lexical_length)"
                " FROM STDIN"
            ) as copy:
                rows = chunk_rows(source_id, source_key, draft, self._dialect)
                for chunk_row, terms in zip(rows, lexical, strict=True):
                    copy.write_row((*chunk_row, terms.field, terms.tsvector(), terms.length))
        self._insert_vectors(conn, draft.embedder, draft.vector_keys, draft.vectors)
        # Two writers of one filename take turns here, so versions never fork.
        conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            (f"{draft.bucket_id}/{draft.filename}",),
        )
        self._link_version(conn, source_key, draft)
        # Last, as these rows are shared by every write: their locks are held the shortest.
        fields = count_terms(conn, lexical, sign=1)
        refresh_impacts(conn, fields)
        add_postings(conn, source_key)

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
                "INSERT INTO vectors (embedder, vector_key, vector) VALUES (%s, %s, %b)"
                " ON CONFLICT DO NOTHING",
                [(embedder, key, rows[key]) for key in sorted(rows)],
            )

    @staticmethod
    def _forget_derived(conn: Connection, source_keys: Sequence[int]) -> None:
        """Take the sources' chunks out of the lexical statistics and postings
        (``postgres.search``)."""
        counted = [
            ChunkTerms.stored(row["lexical_field"], row["lexemes"], row["lexical_length"])
            for row in conn.execute(
                "SELECT lexical_field, tsvector_to_array(lexemes) AS lexemes, lexical_length"
                " FROM chunks WHERE source_key = ANY(%s)",
                (list(source_keys),),
            )
        ]
        # The postings after the counts, whose rows they lock: in the order every write takes.
        fields = count_terms(conn, counted, sign=-1)
        forget_postings(conn, source_keys)
        refresh_impacts(conn, fields)

    # vectors ---------------------------------------------------------------------------------
    def put_vectors(self, embedder: str, keys: Sequence[str], vectors: Vectors) -> None:
        with self.transaction() as conn:
            self._insert_vectors(conn, embedder, keys, vectors)

    # search ----------------------------------------------------------------------------------
    def search_lexical(self, query: str, scope: Scope, *, limit: int) -> list[ChunkHit]:
        search = self._search(scope, query=query)
        if limit <= 0 or not search.lexemes or search.nothing_allowed:
            return []
        rows = self._read(
            sql.SQL("WITH {}, {} SELECT id, score FROM lexical").format(
                search.allowed,
                search.lexical(limit, self._lexical_depth, self._lexical_pool, self._lexical_share),
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
            nearest=limit,
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
            for row in self._read(
                search.hybrid(
                    fusion, limit, self._lexical_depth, self._lexical_pool, self._lexical_share
                ),
                search.params,
                search=search,
                nearest=fusion.candidates,
            )
        ]

    def _search(self, scope: Scope, *, query: str = "", vector: Vectors | None = None) -> Search:
        return Search(scope, query=query, vector=vector, embedder=self.embedder, dim=self.dim)
