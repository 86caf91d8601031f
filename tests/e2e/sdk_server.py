"""A citewell server for the OpenAI SDK tests: ``python sdk_server.py DATA_DIR PORT``.

Run with the interpreter that has citewell installed, so that the SDK tests themselves can run in
another one (openai 1.x). Besides the default agent it serves agents the tests need: one that
hides its sources, and two whose generator fails (unreachable, timed out).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import uvicorn
from fastapi import FastAPI

from citewell.api import create_app
from citewell.config import RetrieveSettings, Settings
from citewell.errors import GeneratorError, GeneratorTimeout, GeneratorUnavailable
from citewell.events import Draft, TextPiece
from citewell.model import Agent, Evidence

AGENTS = (
    Agent(),
    Agent(name="citewell-hidden", show_sources=False),
    Agent(name="citewell-broken", generator="broken"),
    Agent(name="citewell-slow", generator="slow"),
)


class Failing:
    """Writes a few words, then fails as a remote model's backend would."""

    judges_answerability = True

    def __init__(self, name: str, error: GeneratorError) -> None:
        self.name = name
        self.error = error

    async def generate(self, evidence: Evidence, *, agent: Agent) -> AsyncIterator[Draft]:
        yield TextPiece("The answer begins")
        raise self.error


def build(data_dir: Path) -> FastAPI:
    settings = Settings(data_dir=data_dir, retrieve=RetrieveSettings(embedder="use", threads=1))
    app = create_app(settings, agents=AGENTS)
    opened = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with opened(app):
            generators = app.state.engine.generators
            generators["broken"] = Failing(
                "broken", GeneratorUnavailable("The model server at http://127.0.0.1:9 refused.")
            )
            generators["slow"] = Failing(
                "slow", GeneratorTimeout("The model did not answer within 60 seconds.")
            )
            yield

    app.router.lifespan_context = lifespan
    return app


if __name__ == "__main__":
    data_dir, port = Path(sys.argv[1]), int(sys.argv[2])
    uvicorn.run(build(data_dir), host="127.0.0.1", port=port, log_level="warning")
