"""Readers, by name: which sentences answer a question, which spans support a claim.

    reader = open_reader(settings)
    scores = reader.score_answers("What is the refund window?", sentences)
    supported = reader.score_support("Refunds are accepted for 30 days.", spans)

``citewell-reader`` (the default) is citewell's own cross-encoder, trained from e5-small's
weights on open data (``citewell.read.training``, docs/reader.md); ``lexical`` is word overlap,
the fallback when the trained reader cannot be built, which says so on stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from citewell.config import Settings
from citewell.embed.base import Embedder
from citewell.embed.e5 import E5Small
from citewell.encoder import E5_EMBEDDING
from citewell.errors import ConfigError
from citewell.read.base import Reader, Scores
from citewell.read.cross_encoder import CrossEncoderReader
from citewell.read.lexical import LexicalReader

__all__ = ["READERS", "Reader", "Scores", "open_reader", "reading_e5"]

READERS: dict[str, Callable[[Settings, E5Small | None], Reader]] = {
    "citewell-reader": lambda settings, e5: CrossEncoderReader(
        settings.read.threads, settings.model_cache_dir, e5=e5
    ),
    "lexical": lambda settings, e5: LexicalReader(),
}
"""Setting (``ReadSettings.reader``) → factory, given the library's e5-small if it has one."""


def reading_e5(embedder: Embedder | None) -> E5Small | None:
    """The library's ``embedder``, for a reader to embed with, where it is the e5-small build
    the reader's cosine was calibrated with; else None (the reader builds its own)."""
    if isinstance(embedder, E5Small) and embedder.name == E5_EMBEDDING.name:
        return embedder
    return None


def open_reader(settings: Settings, embedder: Embedder | None = None) -> Reader:
    """The reader ``settings.read`` names, its model built if need be; the lexical reader, with
    a warning, when the trained one cannot be built. Given the library's ``embedder``, when that
    is the e5-small build the reader's cosine was calibrated with, the reader embeds with it: one
    e5 model in memory, and a question embedded once, to search and to read."""
    name = settings.read.reader
    factory = READERS.get(name)
    if factory is None:
        raise ConfigError(f"unknown reader {name!r}; known: {', '.join(sorted(READERS))}")
    reader = factory(settings, reading_e5(embedder))
    if isinstance(reader, CrossEncoderReader):
        try:
            reader.build()
        except (OSError, ConfigError, ValueError) as error:
            print(
                f"citewell: the trained reader cannot be built ({error}); "
                "reading by word overlap instead",
                file=sys.stderr,
            )
            return LexicalReader()
    return reader
