"""Dense search at scale: exact numpy scan against the HNSW graph of VectorIndex.

The vectors are synthetic and clustered as real embeddings are: unit vectors around a few
hundred random centres, with isotropic Gaussian noise (``--noise`` is its norm relative to the
centre's; 1.0 puts a vector at cosine ~0.7 from its centre). Queries come from the same
distribution. Passages sit in sources of 100, so a restriction to half of the sources keeps
every other source. Recall@10 is against the exact search of the same rows.

Figures: the build time of the graph (``threads`` OpenMP threads, in the background thread, timed
from the add to ``wait_until_ready``), the rate at which rows added afterwards reach the graph,
and the median / p95 time of ``VectorIndex.search`` (the whole call: restriction, selector,
merge) for the exact scan and the graph, at limit 10 and 100.

    .venv/bin/python bench/vectors.py                      # 100k × 384, 1 thread
    .venv/bin/python bench/vectors.py --rows 1000000 --threads 2
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import numpy as np
from threadpoolctl import threadpool_limits

from citewell.store.sqlite.vectors import VectorIndex
from common import machine, percentile, reproduce_line, table

PASSAGES_PER_SOURCE = 100


def clustered(rng: np.random.Generator, n: int, centres: np.ndarray, noise: float) -> np.ndarray:
    out = np.empty((n, centres.shape[1]), dtype=np.float32)
    for start in range(0, n, 50_000):  # in slices, to keep the float64 noise small
        end = min(n, start + 50_000)
        rows = centres[rng.integers(0, len(centres), end - start)]
        rows = rows + rng.standard_normal(rows.shape) * (noise / np.sqrt(centres.shape[1]))
        out[start:end] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out


def timed_search(
    index: VectorIndex, queries: np.ndarray, allowed: set[int] | None, limit: int
) -> tuple[list[float], list[list[str]]]:
    times, results = [], []
    for query in queries:
        start = time.perf_counter()
        hits = index.search(query, source_keys=allowed, limit=limit)
        times.append((time.perf_counter() - start) * 1000)
        results.append([hit.chunk_id for hit in hits])
    return times, results


def recall(found: Sequence[list[str]], truth: Sequence[list[str]]) -> float:
    return float(
        np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth, strict=True)])
    )


def main() -> None:
    args = _parser().parse_args()
    with threadpool_limits(args.threads):  # numpy's BLAS too: --threads cores in all
        run(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--centres", type=int, default=300)
    parser.add_argument("--noise", type=float, default=1.0)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--threads", type=int, default=1, help="threads of the graph build and of numpy's BLAS"
    )
    parser.add_argument("--added", type=int, default=2_000, help="rows added after the build")
    return parser


def run(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((args.centres, args.dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    vectors = clustered(rng, args.rows + args.added, centres, args.noise)
    queries = clustered(rng, args.queries, centres, args.noise)
    chunk_ids = [f"c{i}" for i in range(len(vectors))]
    keys = np.arange(len(vectors)) // PASSAGES_PER_SOURCE
    n = args.rows

    exact = VectorIndex(args.dim, ann_threshold=2**62)
    exact.add(chunk_ids[:n], keys[:n], vectors[:n])
    ann = VectorIndex(args.dim, ann_threshold=min(n, 50_000), threads=args.threads)
    start = time.perf_counter()
    ann.add(chunk_ids[:n], keys[:n], vectors[:n])
    assert ann.wait_until_ready() and ann.approximate
    build = time.perf_counter() - start

    half = set(range(0, int(keys[n - 1]) + 1, 2))
    rows = []
    for allowed, label in ((None, "all"), (half, "50% of sources")):
        for limit in (10, 100):
            exact_ms, truth = timed_search(exact, queries, allowed, limit)
            time.sleep(0.1)  # let BLAS threads stop spinning (with --threads above 1)
            ann_ms, found = timed_search(ann, queries, allowed, limit)
            rows.append(
                [
                    label,
                    limit,
                    round(percentile(exact_ms, 50), 2),
                    round(percentile(exact_ms, 95), 2),
                    round(percentile(ann_ms, 50), 3),
                    round(percentile(ann_ms, 95), 3),
                    recall([f[:10] for f in found], [t[:10] for t in truth]),
                    recall(found, truth),
                ]
            )

    start = time.perf_counter()
    for first in range(n, n + args.added, 50):
        ann.add(chunk_ids[first : first + 50], keys[first : first + 50], vectors[first:][:50])
    during: list[float] = []  # searches wait for each small add to the graph
    while not ann.wait_until_ready(0):
        during += timed_search(ann, queries[len(during) % len(queries) :][:1], None, 10)[0]
    catch_up = args.added / (time.perf_counter() - start)

    print(f"# bench/vectors.py — {time.strftime('%Y-%m-%d')} — {machine()}\n")
    print(
        f"{n:,} × {args.dim} clustered unit vectors ({args.centres} centres, noise "
        f"{args.noise}), {args.queries} queries; graph build with {args.threads} thread(s): "
        f"**{build:.1f} s**. {args.added:,} rows added afterwards reach the graph at "
        f"{catch_up:,.0f} rows/s (searchable at once meanwhile, as an exact tail); searches "
        f"meanwhile: p50 {percentile(during, 50):.2f} ms, max {max(during, default=0):.1f} ms "
        f"({len(during)} searches).\n"
    )
    header = [
        "restriction",
        "limit",
        "exact p50 ms",
        "exact p95 ms",
        "HNSW p50 ms",
        "HNSW p95 ms",
        "recall@10",
        "recall@limit",
    ]
    print(table(rows, header))
    print("\n" + reproduce_line())
    ann.close()


if __name__ == "__main__":
    main()
