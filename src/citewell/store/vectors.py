"""Exact nearest-neighbour search over unit vectors held in memory, with numpy.

One float32 matrix-vector product scores every vector: at 100k × 384 that is one pass over 150 MB,
bounded by memory bandwidth rather than arithmetic, and exact, so no recall is traded away.

Rows ``[:size]`` of the current arrays are never written again: ``add`` writes past them (growing
into new arrays when full) and ``remove_sources`` builds new arrays. A search therefore takes a
snapshot of (arrays, size) under the lock and scores it without the lock, while an add proceeds.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from citewell.store.base import ChunkHit, Vectors

__all__ = ["VectorIndex"]

Keys = npt.NDArray[np.int64]
_T = TypeVar("_T", bound=np.generic)
_MIN_CAPACITY = 1024
_GATHER_BELOW = 0.25
"""Score only the allowed rows when they are fewer than this share of all rows (cheaper than
scoring everything once the copy of the rows costs less than the rows skipped)."""


@dataclass(frozen=True, slots=True)
class _Snapshot:
    vectors: Vectors
    keys: Keys
    chunk_ids: list[str]
    """May grow past ``len(keys)`` after the snapshot; only its first ``len(keys)`` are ours."""


class VectorIndex:
    """Chunk vectors with their source keys; cosine search restricted to allowed sources."""

    def __init__(self, dim: int) -> None:
        if dim <= 0:
            raise ValueError(f"dim must be positive, not {dim}")
        self.dim = dim
        self._lock = threading.Lock()
        self._vectors: Vectors = np.empty((0, dim), dtype=np.float32)
        self._keys: Keys = np.empty(0, dtype=np.int64)
        self._chunk_ids: list[str] = []
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(
        self,
        chunk_ids: Sequence[str],
        source_keys: Sequence[int] | npt.NDArray[np.integer],
        vectors: Vectors,
    ) -> None:
        """Append vectors (unit length, shape (n, dim)); amortised O(1) per row."""
        rows = np.asarray(vectors, dtype=np.float32)
        keys = np.asarray(source_keys, dtype=np.int64)
        n = len(chunk_ids)
        if rows.ndim != 2 or rows.shape != (n, self.dim) or keys.shape != (n,):
            raise ValueError(
                f"expected {n} chunk ids, {n} source keys and vectors of shape ({n}, {self.dim}); "
                f"got {keys.shape[0] if keys.ndim else keys.size} keys and vectors {rows.shape}"
            )
        with self._lock:
            end = self._size + n
            if end > len(self._keys):
                self._grow(end)
            self._vectors[self._size : end] = rows
            self._keys[self._size : end] = keys
            self._chunk_ids.extend(chunk_ids)
            self._size = end

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
            self._chunk_ids = [self._chunk_ids[i] for i in keep.tolist()]
            self._size = len(keep)

    def search(
        self,
        vector: Vectors,
        *,
        source_keys: Collection[int] | npt.NDArray[np.integer] | None,
        limit: int,
    ) -> list[ChunkHit]:
        """The ``limit`` most similar vectors among the allowed sources (None: all), best first.

        The restriction applies before ranking, so allowed vectors fill the result even when
        better-scoring ones belong to other sources.
        """
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape != (self.dim,):
            raise ValueError(f"expected a query vector of {self.dim} values, got {query.shape}")
        snapshot = self._snapshot()
        if limit <= 0 or len(snapshot.keys) == 0:
            return []
        rows, scores = _score(snapshot, query, source_keys)
        top = _top(scores, limit)
        return [
            ChunkHit(snapshot.chunk_ids[row], float(score))
            for row, score in zip(rows[top].tolist(), scores[top].tolist(), strict=True)
        ]

    def _snapshot(self) -> _Snapshot:
        with self._lock:
            n = self._size
            return _Snapshot(self._vectors[:n], self._keys[:n], self._chunk_ids)

    def _grow(self, needed: int) -> None:
        # Doubling keeps appends amortised O(1); the old arrays stay valid for running searches.
        capacity = max(_MIN_CAPACITY, needed, 2 * len(self._keys))
        self._vectors = _resized(self._vectors[: self._size], capacity)
        self._keys = _resized(self._keys[: self._size], capacity)


def _score(
    snapshot: _Snapshot,
    query: npt.NDArray[np.float32],
    source_keys: Collection[int] | npt.NDArray[np.integer] | None,
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float32]]:
    """The rows that may be returned and their cosine similarity to the query."""
    n = len(snapshot.keys)
    if source_keys is None:
        return np.arange(n), snapshot.vectors @ query
    rows = np.flatnonzero(np.isin(snapshot.keys, _allowed(source_keys)))
    if len(rows) < _GATHER_BELOW * n:
        return rows, snapshot.vectors[rows] @ query
    return rows, (snapshot.vectors @ query)[rows]


def _top(scores: npt.NDArray[np.float32], limit: int) -> npt.NDArray[np.intp]:
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
