"""The PostgreSQL store behind PgBouncer in transaction mode: every transaction may run on a
different server connection, which may carry another client's session settings. The store keeps
nothing on a connection (nothing prepared, every search's settings local to its transaction), so
through PgBouncer it answers exactly as over a direct connection."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from citewell.model import Principal
from citewell.store.base import Fusion, Scope
from citewell.store.postgres import PostgresStore
from tests.contracts.store import DIM, EMBEDDER, LOCAL, draft, vector_for

pytestmark = pytest.mark.integration

TOPICS = [
    "refunds are paid within thirty days",
    "the museum opens at nine every morning",
    "shipping is free above fifty euros",
    "damaged goods are replaced at once",
    "the library lends books for three weeks",
    "tickets for children are half price",
]
QUERIES = ["refunds of damaged goods", "when does the museum open", "free shipping", "books"]
WRITERS = 4
READERS = 8


def _text(writer: int, n: int) -> str:
    return "\n".join(
        f"Note {writer}.{n}.{line}: {TOPICS[(writer + n + line) % len(TOPICS)]}."
        for line in range(12)
    )


def _pollute_every_server_connection(url: str) -> None:
    """Leave session settings that would break a search on both of PgBouncer's server
    connections, as another client of the same pool may."""
    first, second = psycopg.connect(url), psycopg.connect(url)
    try:
        for conn in (first, second):  # both in a transaction at once: one server connection each
            conn.execute("SET hnsw.ef_search = 1")
            conn.execute("SET hnsw.iterative_scan = off")
        first.commit()
        second.commit()
    finally:
        first.close()
        second.close()


def test_every_read_through_pgbouncer_in_transaction_mode_is_the_direct_connections(
    database_url: str, pgbouncer: Callable[[str], str], tmp_path: Path
) -> None:
    bounced_url = pgbouncer(database_url)
    _pollute_every_server_connection(bounced_url)
    with psycopg.connect(bounced_url, autocommit=True) as conn:
        assert conn.execute("SHOW hnsw.ef_search").fetchone() == ("1",)
    # Dense searches walk the HNSW graph at every scope size.
    direct = PostgresStore(database_url, tmp_path, embedder=EMBEDDER, dim=DIM, exact_below=0)
    bounced = PostgresStore(
        bounced_url, tmp_path, embedder=EMBEDDER, dim=DIM, exact_below=0, connections=8
    )
    try:
        bucket = bounced.create_bucket("notes", tenant_id="default").id

        def write(writer: int) -> None:
            for n in range(6):  # every third file is for HR only; the last one replaces the first
                filename = f"{writer}-{n % 5}.txt"
                acl = frozenset({"hr"}) if n % 3 == 2 else frozenset()
                bounced.add_source(draft(bucket, filename, _text(writer, n), acl=acl))
            bounced.delete_source(
                next(s.id for s in bounced.list_sources(bucket) if s.filename == f"{writer}-1.txt")
            )

        with ThreadPoolExecutor(WRITERS) as pool:
            list(pool.map(write, range(WRITERS)))

        everyone = Scope(principal=LOCAL, bucket_ids=(bucket,))
        outsider = Scope(principal=Principal(), bucket_ids=(bucket,))
        fusion = Fusion(candidates=20)

        def reads(store: PostgresStore) -> list[object]:
            found: list[object] = [
                store.list_sources(bucket, include_superseded=True),
                store.get_sources(s.id for s in store.list_sources(bucket)),
            ]
            for query in QUERIES:
                vector = vector_for(query)
                for scope in (everyone, outsider):
                    found.append(store.search_lexical(query, scope, limit=10))
                    found.append(store.search_dense(vector, scope, limit=10))
                    found.append(store.search_hybrid(query, vector, scope, limit=10, fusion=fusion))
            return found

        expected = reads(direct)
        assert len(expected[0]) == WRITERS * 5  # type: ignore[arg-type]
        assert all(expected[2:])  # every search finds something
        # The outsider's filtered graph walk fills its limit: iterative scanning is on.
        assert all(len(hits) == 10 for hits in expected[6::6])  # type: ignore[arg-type]
        barrier = threading.Barrier(READERS)

        def read(_: int) -> list[list[object]]:
            barrier.wait()
            return [reads(bounced) for _ in range(3)]  # past psycopg's 5 runs before preparing

        with ThreadPoolExecutor(READERS) as pool:
            for rounds in pool.map(read, range(READERS)):
                for found in rounds:
                    assert found == expected
    finally:
        bounced.close()
        direct.close()
