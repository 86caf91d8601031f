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
from citewell.errors import ConfigError
from citewell.read.base import Reader, Scores
from citewell.read.cross_encoder import CrossEncoderReader
from citewell.read.lexical import LexicalReader

__all__ = ["READERS", "Reader", "Scores", "open_reader"]

READERS: dict[str, Callable[[Settings], Reader]] = {
    "citewell-reader": lambda settings: CrossEncoderReader(
        settings.read.threads, settings.model_cache_dir
    ),
    "lexical": lambda settings: LexicalReader(),
}
"""Setting (``ReadSettings.reader``) → factory."""


def open_reader(settings: Settings) -> Reader:
    """The reader ``settings.read`` names, its model built if need be; the lexical reader, with
    a warning, when the trained one cannot be built."""
    name = settings.read.reader
    factory = READERS.get(name)
    if factory is None:
        raise ConfigError(f"unknown reader {name!r}; known: {', '.join(sorted(READERS))}")
    reader = factory(settings)
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
