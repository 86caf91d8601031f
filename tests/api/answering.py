"""An app that answers: a shop's two documents, and agents whose generator a test scripts."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import pytest
from fastapi.testclient import TestClient

from citewell.api import create_app
from citewell.cite.verify import CalibratedVerifier
from citewell.config import Settings
from citewell.errors import GeneratorTimeout, GeneratorUnavailable
from citewell.events import Declined, Draft, TextPiece
from citewell.model import Agent, Evidence

POLICY = (
    "# Refunds\n\nRefunds are paid within thirty days of the request. "
    "A receipt is required for every refund.\n\n"
    "# Opening hours\n\nThe shop opens at nine in the morning. It closes at six."
)
WARRANTY = "Every bicycle carries a two-year warranty on its frame."
ANSWER = "Refunds are paid within thirty days. Every bicycle carries a two-year warranty."
FIRST, SECOND = "Refunds are paid within thirty days.", "Every bicycle carries a two-year warranty."


def support(claim: str, cited: str) -> float:
    """The support score an annotation reports for ``claim`` citing ``cited`` (4 decimals)."""
    return round(CalibratedVerifier().support(claim, [cited], language="en"), 4)


AGENTS = (
    Agent(),
    Agent(name="scripted", generator="scripted"),
    Agent(name="wandering", generator="wandering"),
    Agent(name="hidden", generator="scripted", show_sources=False),
    Agent(name="declining", generator="declining"),
    Agent(name="broken", generator="broken"),
    Agent(name="slow", generator="slow"),
)


def number(evidence: Evidence, words: str) -> int:
    return next(s.number for s in evidence.sentences if words in s.text)


class Scripted:
    """Answers two sentences, each citing the sentence it restates; keeps what it was given."""

    name = "scripted"
    judges_answerability = True  # it stands in for a model

    def __init__(self) -> None:
        self.seen: list[Evidence] = []

    async def generate(self, evidence: Evidence, *, agent: Agent) -> AsyncIterator[Draft]:
        self.seen.append(evidence)
        refunds, warranty = number(evidence, "thirty days"), number(evidence, "two-year")
        for piece in (
            f"Refunds are paid within thirty days [{refunds}].",
            " Every bicycle ",
            f"carries a two-year warranty [{warranty}].",
        ):
            yield TextPiece(piece)


UNSUPPORTED = "The shop sells ice cream on Sundays."
"""A sentence no source holds: a non-strict agent keeps it, uncited, and flags it."""


class Wandering:
    """Answers a cited sentence, then one the sources do not support."""

    name = "wandering"
    judges_answerability = True

    async def generate(self, evidence: Evidence, *, agent: Agent) -> AsyncIterator[Draft]:
        refunds = number(evidence, "thirty days")
        yield TextPiece(f"Refunds are paid within thirty days [{refunds}]. {UNSUPPORTED}")


class Failing:
    judges_answerability = True

    def __init__(self, name: str, error: Exception | None) -> None:
        self.name = name
        self.error = error

    async def generate(self, evidence: Evidence, *, agent: Agent) -> AsyncIterator[Draft]:
        if self.error is None:
            yield Declined()
            return
        yield TextPiece("The answer begins")
        raise self.error


@pytest.fixture
def scripted() -> Scripted:
    return Scripted()


@pytest.fixture
def answering(settings: Settings, scripted: Scripted) -> Iterator[TestClient]:
    """A client of an app whose 'shop' bucket holds a refund policy and a warranty."""
    with TestClient(create_app(settings, agents=AGENTS)) as client:
        engine = client.app.state.engine  # type: ignore[attr-defined]
        engine.generators.update(
            scripted=scripted,
            wandering=Wandering(),
            declining=Failing("declining", None),
            broken=Failing("broken", GeneratorUnavailable("The model server refused.")),
            slow=Failing("slow", GeneratorTimeout("The model did not answer in time.")),
        )
        for slug in ("shop", "other"):
            assert client.post("/v1/buckets", json={"slug": slug}).status_code == 201
        for name, text in (("policy.md", POLICY), ("warranty.txt", WARRANTY)):
            files = {"file": (name, text.encode())}
            assert client.post("/v1/buckets/shop/sources", files=files).status_code == 201
        yield client


def sse(text: str, *, named: bool = True) -> list[dict[str, Any]]:
    """The data objects of a server-sent event stream (checking each `event:` line if named)."""
    events = []
    for message in text.split("\n\n"):
        if not message:
            continue
        lines = message.split("\n")
        data = lines[-1].removeprefix("data: ")
        if data == "[DONE]":
            events.append({"type": "[DONE]"})
            continue
        parsed = json.loads(data)
        if named:
            assert lines[0] == f"event: {parsed['type']}"
        else:
            assert len(lines) == 1
        events.append(parsed)
    return events


def texts(
    annotations: Sequence[dict[str, Any]], text: str, get: Callable[[dict[str, Any]], Any]
) -> list[str]:
    """The text each annotation covers."""
    return [text[get(a)["start_index"] : get(a)["end_index"]] for a in annotations]
