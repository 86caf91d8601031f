"""Embedders, by name: the bundled models register here the way a plugin would.

embedder = open_embedder(settings)
vectors = embedder.embed_passages(["..."])
"""

from __future__ import annotations

from collections.abc import Callable

from citewell.config import Settings
from citewell.embed.base import Embedder
from citewell.embed.e5 import E5Small
from citewell.embed.use import UniversalSentenceEncoder
from citewell.errors import ConfigError

__all__ = ["EMBEDDERS", "Embedder", "open_embedder"]

EMBEDDERS: dict[str, Callable[[Settings], Embedder]] = {
    "e5-small": lambda settings: E5Small(settings.retrieve.threads, settings.model_cache_dir),
    "use": lambda settings: UniversalSentenceEncoder(threads=settings.retrieve.threads),
}
"""Setting (``RetrieveSettings.embedder``) → factory. Models load on first use, not here."""


def open_embedder(settings: Settings) -> Embedder:
    """The embedder ``settings.retrieve`` names; raises ``ConfigError`` for an unknown name."""
    name = settings.retrieve.embedder
    factory = EMBEDDERS.get(name)
    if factory is None:
        known = ", ".join(sorted(EMBEDDERS))
        raise ConfigError(f"unknown embedder {name!r}; known: {known}")
    return factory(settings)
