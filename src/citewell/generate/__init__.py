"""Generators, by name: the built-ins register here the way a plugin would.

    generators = open_generators(settings)
    generators["extractive"].generate(evidence, agent=agent)

Opening a generator connects to nothing, loads nothing and checks nothing: a remote generator
reads its settings on each answer, and the local one loads its model on its first answer, so an
unconfigured one fails only the agents that use it, with a ``GeneratorUnavailable`` naming the
missing setting.
"""

from __future__ import annotations

from collections.abc import Callable

from citewell.config import Settings
from citewell.generate.base import Generator
from citewell.generate.extractive import ExtractiveGenerator

__all__ = ["GENERATORS", "Generator", "open_generators"]


def _openai_compatible(settings: Settings) -> Generator:
    from citewell.generate.openai_compat import OpenAICompatibleGenerator

    return OpenAICompatibleGenerator(settings.generate)


def _anthropic(settings: Settings) -> Generator:
    from citewell.generate.anthropic import AnthropicGenerator

    return AnthropicGenerator(settings.generate)


def _local(settings: Settings) -> Generator:
    from citewell.generate.local import LocalGenerator

    return LocalGenerator(settings.generate)


GENERATORS: dict[str, Callable[[Settings], Generator]] = {
    ExtractiveGenerator.name: lambda settings: ExtractiveGenerator(),
    "openai-compatible": _openai_compatible,
    "anthropic": _anthropic,
    "local": _local,
}
"""Name (``Agent.generator``) → factory. Remote generators connect on first use, not here."""


def open_generators(settings: Settings) -> dict[str, Generator]:
    """Every registered generator, configured from the settings."""
    return {name: factory(settings) for name, factory in GENERATORS.items()}
