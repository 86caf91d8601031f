"""The Embedder protocol: text in, unit-length vectors out.

What every bundled embedder shares: native engines load lazily, so opening a store or a process
that never embeds does not pay for the weights; and they are called one batch at a time under a
lock, because they are not known to be re-entrant and because a query waiting behind a long
ingest then waits for one batch, not for the whole ingest.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from citewell.store.base import Vectors

__all__ = ["BATCH_SIZE", "Embedder", "LazyModel", "embed_in_batches", "unit_rows", "unit_vector"]


class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors, the same way every time.

    ``name`` identifies the model and its settings that change vectors; vectors made under one
    name are never compared with vectors made under another.
    """

    name: str
    dim: int
    lexical_weight: float
    """Weight of BM25 when fused with this embedder's ranking, tuned on the development data."""

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        """Vectors for passages to be searched, shape (len(texts), dim)."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """The vector of one query, shape (dim,)."""
        ...


BATCH_SIZE = 32
"""Texts per call into an engine: bounds memory and how long a query waits for the lock."""

M = TypeVar("M")


class LazyModel(Generic[M]):
    """A model built by ``load`` on first use, once; every use holds the model's lock."""

    def __init__(self, load: Callable[[], M]) -> None:
        self._load = load
        self._lock = threading.Lock()
        self._model: M | None = None

    @contextmanager
    def use(self) -> Iterator[M]:
        with self._lock:
            if self._model is None:
                self._model = self._load()
            yield self._model


def embed_in_batches(
    texts: Sequence[str],
    encode: Callable[[list[str]], npt.NDArray[np.floating]],
    dim: int,
    batch_size: int = BATCH_SIZE,
) -> Vectors:
    """Unit rows, shape (len(texts), dim), calling ``encode`` on ``batch_size`` texts at a time."""
    out = np.empty((len(texts), dim), dtype=np.float32)
    for start in range(0, len(texts), batch_size):
        batch = list(texts[start : start + batch_size])
        out[start : start + len(batch)] = encode(batch)
    return unit_rows(out)


def unit_rows(rows: npt.NDArray[np.floating]) -> Vectors:
    """Rows scaled to unit length as C-contiguous float32 (an all-zero row stays zero)."""
    out = np.array(rows, dtype=np.float32, order="C", ndmin=2)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


def unit_vector(vector: npt.NDArray[np.floating]) -> Vectors:
    """One vector (any shape holding ``dim`` values) as a unit float32 array of shape (dim,)."""
    return unit_rows(np.reshape(vector, (1, -1))).reshape(-1)
