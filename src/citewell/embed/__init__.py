"""Embedders, by name: the bundled models register here the way a plugin would.

embedder = open_embedder(settings.retrieve)
vectors = embedder.embed_passages(["..."])
"""

from __future__ import annotations

from collections.abc import Callable

from citewell.config import RetrieveSettings
from citewell.embed.base import Embedder
from citewell.embed.e5 import E5Small
from citewell.embed.use import UniversalSentenceEncoder
from citewell.errors import ConfigError

__all__ = ["EMBEDDERS", "Embedder", "open_embedder"]

EMBEDDERS: dict[str, Callable[[RetrieveSettings], Embedder]] = {
    E5Small.name: lambda settings: E5Small(threads=settings.threads),
    UniversalSentenceEncoder.name: lambda settings: UniversalSentenceEncoder(
        threads=settings.threads
    ),
}
"""Name (``RetrieveSettings.embedder``) → factory. Models load on first use, not here."""


def open_embedder(settings: RetrieveSettings) -> Embedder:
    """The embedder named by ``settings.embedder``; raises ``ConfigError`` for an unknown name."""
    factory = EMBEDDERS.get(settings.embedder)
    if factory is None:
        known = ", ".join(sorted(EMBEDDERS))
        raise ConfigError(f"unknown embedder {settings.embedder!r}; known: {known}")
    return factory(settings)
