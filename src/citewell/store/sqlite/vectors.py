"""Nearest-neighbour search over unit vectors held in memory: exact with numpy, HNSW past a size.

Exact search is one float32 matrix-vector product over every row: at 100k × 384 that is one pass
over 150 MB (~15-20 ms on one core), bounded by memory bandwidth. From ``ann_threshold`` rows on,
a faiss HNSW graph (inner product) answers instead, in well under a millisecond.

Rows and snapshots. Each row has a chunk id, a source key and a row id (a counter, so ids grow
along the arrays and survive the compaction in ``remove_sources``). Rows ``[:size]`` of the current
arrays are never written again: ``add`` writes past them (growing into new arrays when full) and
``remove_sources`` builds new arrays. A search takes a snapshot of (arrays, size) under the lock
and scores it without the lock, while an add proceeds.

The graph. A background worker builds it from the rows, in batches and without any lock, until
it has caught up with the rows added meanwhile; only then do searches see it (exact search serves
until then). Its labels are row ids. Later rows reach it through the same worker in small batches
under the graph's write lock (faiss may not add while it searches); until they do, they form a
tail that searches score exactly, so every row is searchable as soon as ``add`` returns. HNSW
cannot delete: removed rows stay in the graph as tombstones, excluded inside the graph search by
an ID selector, and past ``_REBUILD_ABOVE`` of the graph the worker builds a fresh one in the
background.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from citewell.store.base import ChunkHit, Vectors

logger = logging.getLogger(__name__)

__all__ = ["VectorIndex"]

Keys = npt.NDArray[np.int64]
Rows = npt.NDArray[np.intp]
Scores = npt.NDArray[np.float32]
_T = TypeVar("_T", bound=np.generic)
_MIN_CAPACITY = 1024
_GATHER_BELOW = 0.25
"""Score only the allowed rows, exactly, when they are fewer than this share of all rows (cheaper
than scoring everything once the copy of the rows costs less than the rows skipped; with a graph,
exact over a small share also costs little and spares HNSW its weakest case, a sparse filter)."""

# HNSW parameters, from measurements on one core. Synthetic 100k × 384 (bench/vectors.py
# --noise 1.5): efConstruction below 2*M (the layer-0 degree) builds a poor graph (efC 40:
# recall@10 0.95 even at efSearch 200); efC 80 reaches 0.9995 at efSearch 128 and builds in ~25 s;
# efC 128 gains nothing measurable for 1.7x the build time; M 32 is no better and builds 30%
# slower. Real e5-small vectors (11k SciFact passages as queries against the rest): efSearch
# 64 / 128 / 256 give recall@10 0.978 / 0.993 / 0.998 (restricted to half the sources: 0.965 /
# 0.992 / 0.998). efSearch 128 costs ~0.35 ms a query (1-2 ms restricted), noise beside the
# 15-30 ms of embedding the query; limit 100 (fusion candidates) searches with 200.
_HNSW_M = 16
_EF_CONSTRUCTION = 80
_EF_SEARCH = 128
_BUILD_BATCH = 1_000
"""Rows per ``add`` while building (unpublished, no lock): a closed index stops between batches,
so ``close`` waits at most for one batch (~0.25 s at 100k rows, 1 thread)."""
_CLOSE_WAIT = 5.0
"""Most seconds ``close`` waits for the worker to leave native code."""
_CATCH_UP_BATCH = 16
"""Rows per ``add`` to a published graph. Searches of that graph wait for one such add (at 100k,
1 thread: ~8 ms at most, p50 4 ms while rows stream in; rows reach the graph at ~2,000/s)."""
_REBUILD_ABOVE = 0.25
"""Rebuild the graph once this share of it is tombstones."""


@dataclass(frozen=True, slots=True)
class _Snapshot:
    vectors: Vectors
    keys: Keys
    ids: Keys
    """Row ids, increasing."""
    chunk_ids: list[str]
    """May grow past ``len(keys)`` after the snapshot; only its first ``len(keys)`` are ours."""


class _ReadWriteLock:
    """Many readers or one writer, taking turns: a waiting writer holds off new readers, and a
    writer lets the readers that waited for its last turn in before it takes the next."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._waiting_readers = 0
        self._writers = 0  # waiting or writing

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._cond:
            if self._writers:
                self._waiting_readers += 1
                self._cond.wait_for(lambda: not self._writers)
                self._waiting_readers -= 1
                self._cond.notify_all()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._waiting_readers)
            self._writers += 1
            self._cond.wait_for(lambda: not self._readers)
        try:
            yield
        finally:
            with self._cond:
                self._writers -= 1
                self._cond.notify_all()


class _Graph:
    """An HNSW graph labelled by row id, holding every live row whose id is below ``through``."""

    def __init__(self, dim: int) -> None:
        faiss = _faiss()
        self._hnsw = faiss.IndexHNSWFlat(dim, _HNSW_M, faiss.METRIC_INNER_PRODUCT)
        self._hnsw.hnsw.efConstruction = _EF_CONSTRUCTION
        self.index = faiss.IndexIDMap(self._hnsw)
        self.through = 0
        self.lock = _ReadWriteLock()

    def __len__(self) -> int:
        return int(self.index.ntotal)

    def add(self, vectors: Vectors, ids: Keys) -> None:
        """Add rows with ids past ``through``; only before publication or under the write lock."""
        self.index.add_with_ids(np.ascontiguousarray(vectors), np.ascontiguousarray(ids))
        self.through = int(ids[-1]) + 1


class VectorIndex:
    """Chunk vectors with their source keys; cosine search restricted to allowed sources.

    ``ann_threshold``: from this many rows on, an HNSW graph built in the background answers
    searches; ``threads``: OpenMP threads of that build.
    """

    def __init__(self, dim: int, *, ann_threshold: int = 50_000, threads: int = 1) -> None:
        if dim <= 0:
            raise ValueError(f"dim must be positive, not {dim}")
        if ann_threshold <= 0 or threads <= 0:
            raise ValueError(
                f"ann_threshold and threads must be positive: {ann_threshold}, {threads}"
            )
        self.dim = dim
        self._ann_threshold = ann_threshold
        self._threads = threads
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._vectors: Vectors = np.empty((0, dim), dtype=np.float32)
        self._keys: Keys = np.empty(0, dtype=np.int64)
        self._ids: Keys = np.empty(0, dtype=np.int64)
        self._chunk_ids: list[str] = []
        self._size = 0
        self._next_id = 0
        self._graph: _Graph | None = None
        self._worker: threading.Thread | None = None
        self._closed = False

    def __len__(self) -> int:
        return self._size

    def add(
        self,
        chunk_ids: Sequence[str],
        source_keys: Sequence[int] | npt.NDArray[np.integer],
        vectors: Vectors,
    ) -> None:
        """Append vectors (unit length, shape (n, dim)); amortised O(1) per row.

        The rows are searchable at once; the graph, if any, takes them in the background.
        """
        rows = np.asarray(vectors, dtype=np.float32)
        keys = np.asarray(source_keys, dtype=np.int64)
        n = len(chunk_ids)
        if rows.ndim != 2 or rows.shape != (n, self.dim) or keys.shape != (n,):
            raise ValueError(
                f"expected {n} chunk ids, {n} source keys and vectors of shape ({n}, {self.dim}); "
                f"got {keys.shape[0] if keys.ndim else keys.size} keys and vectors {rows.shape}"
            )
        if n == 0:
            return
        with self._lock:
            end = self._size + n
            if end > len(self._keys):
                self._grow(end)
            self._vectors[self._size : end] = rows
            self._keys[self._size : end] = keys
            self._ids[self._size : end] = np.arange(self._next_id, self._next_id + n)
            self._chunk_ids.extend(chunk_ids)
            self._size = end
            self._next_id += n
            self._wake()

    def remove_sources(self, source_keys: Collection[int]) -> None:
        """Drop every vector of these sources."""
        removed = _allowed(source_keys)
        with self._lock:
            keep = np.flatnonzero(~np.isin(self._keys[: self._size], removed))
            if len(keep) == self._size:
                return
            # New arrays, never an in-place compaction: running searches hold the old ones.
            capacity = max(_MIN_CAPACITY, len(keep))
            self._vectors = _resized(self._vectors[keep], capacity)
            self._keys = _resized(self._keys[keep], capacity)
            self._ids = _resized(self._ids[keep], capacity)
            self._chunk_ids = [self._chunk_ids[i] for i in keep.tolist()]
            self._size = len(keep)
            self._wake()

    def search(
        self,
        vector: Vectors,
        *,
        source_keys: Collection[int] | npt.NDArray[np.integer] | None,
        limit: int,
    ) -> list[ChunkHit]:
        """The ``limit`` most similar vectors among the allowed sources (None: all), best first.

        The restriction applies before ranking, so allowed vectors fill the result even when
        better-scoring ones belong to other sources. Exact below ``ann_threshold`` rows, while
        the graph is being built, and when the allowed rows are a small share of all rows.
        """
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape != (self.dim,):
            raise ValueError(f"expected a query vector of {self.dim} values, got {query.shape}")
        snapshot, graph = self._snapshot()
        n = len(snapshot.keys)
        if limit <= 0 or n == 0:
            return []
        rows: Rows | None = None
        if source_keys is not None:
            rows = np.flatnonzero(np.isin(snapshot.keys, _allowed(source_keys)))
        if (
            graph is None
            or n < self._ann_threshold
            or (rows is not None and len(rows) < _GATHER_BELOW * n)
        ):
            rows, scores = _exact(snapshot, query, rows)
        else:
            rows, scores = _approximate(graph, snapshot, query, rows, limit)
        top = _top(scores, limit)
        return [
            ChunkHit(snapshot.chunk_ids[row], float(score))
            for row, score in zip(rows[top].tolist(), scores[top].tolist(), strict=True)
        ]

    @property
    def approximate(self) -> bool:
        """Whether searches over all rows go through the graph now (not an exact scan)."""
        with self._lock:
            return self._graph is not None and self._size >= self._ann_threshold

    def wait_until_ready(self, timeout: float | None = None) -> bool:
        """For tests and benchmarks: wait until searches use a graph holding every row (or none
        is due, below ``ann_threshold``). False if ``timeout`` seconds passed first."""
        with self._changed:
            self._changed.wait_for(lambda: self._closed or self._settled(), timeout)
            return self._settled()

    def close(self) -> None:
        """Stop the background worker at its next batch, and wait for that (a bounded time).

        Waiting matters: a process that exits while the worker is inside faiss aborts
        ("terminate called without an active exception"). Searches still work afterwards, on
        the graph as it stands.
        """
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join(_CLOSE_WAIT)

    def _snapshot(self) -> tuple[_Snapshot, _Graph | None]:
        with self._lock:
            n = self._size
            snapshot = _Snapshot(self._vectors[:n], self._keys[:n], self._ids[:n], self._chunk_ids)
            return snapshot, self._graph

    def _grow(self, needed: int) -> None:
        # Doubling keeps appends amortised O(1); the old arrays stay valid for running searches.
        capacity = max(_MIN_CAPACITY, needed, 2 * len(self._keys))
        self._vectors = _resized(self._vectors[: self._size], capacity)
        self._keys = _resized(self._keys[: self._size], capacity)
        self._ids = _resized(self._ids[: self._size], capacity)

    # the background worker (_wake, the predicates and _next_job run under self._lock) -------
    def _wake(self) -> None:
        if self._closed or (self._graph is None and self._size < self._ann_threshold):
            return
        if self._worker is None:
            # A daemon: interpreter exit never waits for a build.
            self._worker = threading.Thread(
                target=self._work, name="citewell-vector-index", daemon=True
            )
            self._worker.start()
        self._changed.notify_all()

    def _tombstones(self, graph: _Graph) -> int:
        return len(graph) - int(np.searchsorted(self._ids[: self._size], graph.through))

    def _stale(self, graph: _Graph) -> bool:
        return self._tombstones(graph) > _REBUILD_ABOVE * len(graph)

    def _behind(self, graph: _Graph) -> bool:
        return self._size > 0 and int(self._ids[self._size - 1]) >= graph.through

    def _settled(self) -> bool:
        if self._size < self._ann_threshold:
            return True
        graph = self._graph
        return graph is not None and not self._stale(graph) and not self._behind(graph)

    def _next_job(self) -> Callable[[], None] | None:
        graph = self._graph
        if graph is not None and self._stale(graph) and self._size < self._ann_threshold:
            self._graph = graph = None  # exact from now on; free the memory
            self._changed.notify_all()
        if self._size >= self._ann_threshold and (graph is None or self._stale(graph)):
            return self._build
        if graph is not None and self._behind(graph):
            return lambda: self._catch_up(graph)
        return None

    def _work(self) -> None:
        _faiss().omp_set_num_threads(self._threads)  # OpenMP's setting is per thread
        while True:
            with self._changed:
                job = self._next_job()
                while job is None and not self._closed:
                    self._changed.wait()
                    job = self._next_job()
                if self._closed:
                    return
            assert job is not None
            try:
                job()
            except Exception:
                # Searches stay correct without a graph (exact, or the previous graph): say why
                # and stop working rather than retry a failure that will recur.
                logger.exception("the vector graph could not be built; searches stay exact")
                with self._changed:
                    self._closed = True
                    self._changed.notify_all()
                return

    def _rows_from(self, through: int, batch: int) -> tuple[Vectors, Keys]:
        """Up to ``batch`` rows with ids from ``through`` on: views that stay valid (see top)."""
        with self._lock:
            start = int(np.searchsorted(self._ids[: self._size], through))
            end = min(self._size, start + batch)
            return self._vectors[start:end], self._ids[start:end]

    def _build(self) -> None:
        """Build a graph of every row, unpublished and so without a lock; publish it once it has
        caught up with rows added meanwhile."""
        graph = _Graph(self.dim)
        while True:
            vectors, ids = self._rows_from(graph.through, _BUILD_BATCH)
            if self._closed:
                return
            if len(ids) == 0:
                break
            graph.add(vectors, ids)
        if not len(graph):  # every row went meanwhile
            return
        with self._changed:
            self._graph = graph
            self._changed.notify_all()

    def _catch_up(self, graph: _Graph) -> None:
        vectors, ids = self._rows_from(graph.through, _CATCH_UP_BATCH)
        if len(ids):
            with graph.lock.writing():
                graph.add(vectors, ids)
        with self._changed:
            self._changed.notify_all()


def _exact(
    snapshot: _Snapshot, query: npt.NDArray[np.float32], rows: Rows | None
) -> tuple[Rows, Scores]:
    """The rows that may be returned (None: all) and their cosine similarity to the query."""
    n = len(snapshot.keys)
    if rows is None:
        return np.arange(n), snapshot.vectors @ query
    if len(rows) < _GATHER_BELOW * n:
        return rows, snapshot.vectors[rows] @ query
    return rows, (snapshot.vectors @ query)[rows]


def _approximate(
    graph: _Graph,
    snapshot: _Snapshot,
    query: npt.NDArray[np.float32],
    rows: Rows | None,
    limit: int,
) -> tuple[Rows, Scores]:
    """Candidates from the graph, restricted inside its search, plus the tail it lacks, exactly.

    The graph's rows not in the snapshot (removed, or added since) are excluded by the selector.
    """
    with graph.lock.reading():
        start = int(np.searchsorted(snapshot.ids, graph.through))  # rows[:start] are in the graph
        in_graph = None if rows is None else rows[: int(np.searchsorted(rows, start))]
        selector: Any = None
        if in_graph is not None:
            selector = _bitmap(snapshot.ids[in_graph], graph.through)
        elif len(graph) != start:
            selector = _bitmap(snapshot.ids[:start], graph.through)
        k = min(limit, start if in_graph is None else len(in_graph))
        labels: Keys = np.empty(0, dtype=np.int64)
        graph_scores: Scores = np.empty(0, dtype=np.float32)
        if k > 0:
            params = _faiss().SearchParametersHNSW(efSearch=max(_EF_SEARCH, 2 * limit))
            if selector is not None:
                params.sel = selector
            found, found_labels = graph.index.search(query[None, :], k, params=params)
            graph_scores, labels = found[0], found_labels[0]
    graph_rows = np.searchsorted(snapshot.ids[:start], labels)
    kept = (labels >= 0) & (graph_rows < start)
    kept[kept] = snapshot.ids[graph_rows[kept]] == labels[kept]
    if rows is None:
        tail = np.arange(start, len(snapshot.keys))
        tail_scores = snapshot.vectors[start:] @ query
    else:
        tail = rows[len(in_graph) if in_graph is not None else 0 :]
        tail_scores = snapshot.vectors[tail] @ query
    found_rows = np.concatenate([graph_rows[kept], tail])
    order = np.argsort(found_rows, kind="stable")  # so that _top breaks ties by row
    return found_rows[order], np.concatenate([graph_scores[kept], tail_scores])[order]


def _bitmap(ids: Keys, size: int) -> Any:
    """A faiss selector of these ids (below ``size``), one bit per id."""
    mask = np.zeros(size, dtype=bool)
    mask[ids] = True
    return _faiss().IDSelectorBitmap(np.packbits(mask, bitorder="little"))


def _faiss() -> Any:
    """faiss, imported on first use (~130 ms): only indexes past ``ann_threshold`` need it. Any,
    as the stubs of faiss-cpu 1.15 lack SearchParametersHNSW and IDSelectorBitmap(array)."""
    import faiss

    return faiss


def _top(scores: Scores, limit: int) -> Rows:
    """Positions of the ``limit`` best scores, best first (equal scores: earlier row first)."""
    if limit < len(scores):
        cut = len(scores) - limit  # partitioning for the largest is twice as fast as on -scores
        candidates = np.argpartition(scores, cut)[cut:]
        candidates.sort()
    else:
        candidates = np.arange(len(scores))
    order = np.argsort(-scores[candidates], kind="stable")
    return candidates[order]


def _allowed(source_keys: Collection[int] | npt.NDArray[np.integer]) -> Keys:
    return np.unique(np.fromiter(source_keys, dtype=np.int64, count=len(source_keys)))


def _resized(array: npt.NDArray[_T], capacity: int) -> npt.NDArray[_T]:
    out = np.empty((capacity, *array.shape[1:]), dtype=array.dtype)
    out[: len(array)] = array
    return out
