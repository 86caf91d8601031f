"""The Embedder protocol: text in, unit-length vectors out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from citewell.store.base import Vectors

__all__ = ["Embedder"]


class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors, the same way every time.

    ``name`` identifies the model and its settings that change vectors; vectors made under one
    name are never compared with vectors made under another.
    """

    name: str
    dim: int

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        """Vectors for passages to be searched, shape (len(texts), dim)."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """The vector of one query, shape (dim,)."""
        ...
