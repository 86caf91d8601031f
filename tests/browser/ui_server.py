"""A citewell server for the browser tests: ``python ui_server.py DATA_DIR PORT``.

The operator key is ``CITEWELL_ADMIN_KEY`` from the environment, so every request needs a key,
as on a shared server. Besides the default agent it serves one that hides its sources, one
whose answer streams word by word, as a language model writes, so that a test can watch the
answer grow (it cites with ``[n]`` markers and ends with a sentence no source supports), and
``citewell-local``, a real local model (``CITEWELL_GENERATE__OPENAI__BASE_URL``) when the tests
started one.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import uvicorn
from fastapi import FastAPI

from citewell.api import create_app
from citewell.config import RetrieveSettings, Settings
from citewell.events import CitedSentence, Draft, TextPiece
from citewell.generate.base import Generator
from citewell.model import Agent, Evidence

HIDDEN = "citewell-hidden"
TYPIST = "citewell-typist"
LOCAL = "citewell-local"
UNSUPPORTED = " Its first users were lighthouse keepers on the Moon."
"""What the typist adds to every answer: no source says it, so it is flagged unsupported."""
WORD_PAUSE = 0.04
"""Seconds between two words of the typist: a model's pace, slow enough to see."""

AGENTS = (
    Agent(),
    Agent(name=HIDDEN, show_sources=False),
    Agent(name=TYPIST, generator="typist"),
)


class Typist:
    """The extractive answer, written word by word with ``[n]`` markers, then one sentence more."""

    name = "typist"
    judges_answerability = False  # it writes the extractive answer

    def __init__(self, extractive: Generator) -> None:
        self._extractive = extractive

    async def generate(self, evidence: Evidence, *, agent: Agent) -> AsyncIterator[Draft]:
        async for draft in self._extractive.generate(evidence, agent=agent):
            if not isinstance(draft, CitedSentence):
                yield draft
                continue
            for word in re.findall(r"\s*\S+", draft.text):
                yield TextPiece(word)
                await asyncio.sleep(WORD_PAUSE)
            yield TextPiece("".join(f"[{n}]" for n in draft.evidence))
        yield TextPiece(UNSUPPORTED)


def build(data_dir: Path) -> FastAPI:
    settings = Settings(data_dir=data_dir, retrieve=RetrieveSettings(embedder="use", threads=1))
    local = (
        (Agent(name=LOCAL, generator="openai-compatible"),)
        if settings.generate.openai.base_url
        else ()
    )
    app = create_app(settings, agents=AGENTS + local)
    opened = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with opened(app):
            generators = app.state.engine.generators
            generators["typist"] = Typist(generators["extractive"])
            yield

    app.router.lifespan_context = lifespan
    return app


if __name__ == "__main__":
    data_dir, port = Path(sys.argv[1]), int(sys.argv[2])
    uvicorn.run(build(data_dir), host="127.0.0.1", port=port, log_level="warning")
