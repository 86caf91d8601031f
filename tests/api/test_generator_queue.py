"""A generator with no room for another answer: HTTP 429 in each dialect's shape, streamed or not.

The local generator holds its answer being written plus ``queue`` waiting ones. Here the queue
is 0 and the test holds the one place itself, so every request arrives at a full generator; no
model is read, since the refusal comes before retrieval and generation.
"""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest
from fastapi.testclient import TestClient

from citewell.api import create_app
from citewell.config import GenerateSettings, LocalSettings, Settings
from citewell.generate.base import Queued
from citewell.model import Agent

BUSY = "The local model is writing an answer and 0 more are waiting for it; retry in a moment."


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    queue_of_none = GenerateSettings(local=LocalSettings(queue=0))
    app = create_app(
        settings.model_copy(update={"generate": queue_of_none}),
        agents=(Agent(generator="local"),),
    )
    with TestClient(app) as client:
        yield client


@pytest.fixture
def full(client: TestClient) -> Iterator[None]:
    """The one place of the local generator, held by someone else for the test's length."""
    local = client.app.state.engine.generators["local"]  # type: ignore[attr-defined]
    assert isinstance(local, Queued)
    with local.place():
        yield


def openai_sdk(client: TestClient) -> openai.OpenAI:
    return openai.OpenAI(
        api_key="k", base_url=f"{client.base_url}/v1", http_client=client, max_retries=0
    )


def anthropic_sdk(client: TestClient) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="k", base_url=str(client.base_url), http_client=client, max_retries=0
    )


@pytest.mark.parametrize("stream", [False, True])
def test_chat_completions_answer_429_in_openais_shape(
    client: TestClient, full: None, stream: bool
) -> None:
    with pytest.raises(openai.RateLimitError) as caught:
        openai_sdk(client).chat.completions.create(
            model="citewell-agent",
            messages=[{"role": "user", "content": "How long do refunds take?"}],
            stream=stream,
        )
    assert caught.value.status_code == 429
    assert caught.value.body == {
        "message": BUSY,
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
    # Nothing was tried: the SDK may retry after its backoff.
    assert "x-should-retry" not in caught.value.response.headers


@pytest.mark.parametrize("stream", [False, True])
def test_responses_answer_429_in_openais_shape(
    client: TestClient, full: None, stream: bool
) -> None:
    with pytest.raises(openai.RateLimitError) as caught:
        openai_sdk(client).responses.create(
            model="citewell-agent", input="How long do refunds take?", stream=stream
        )
    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.type == "requests"


@pytest.mark.parametrize("stream", [False, True])
def test_messages_answer_429_in_anthropics_shape(
    client: TestClient, full: None, stream: bool
) -> None:
    response = client.post(
        "/v1/messages",
        json={
            "model": "citewell-agent",
            "max_tokens": 256,
            "messages": [{"role": "user", "content": "How long do refunds take?"}],
            "stream": stream,
        },
        headers={"anthropic-version": "2023-06-01"},
    )
    assert response.status_code == 429
    body = response.json()
    assert body == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": BUSY},
        "request_id": response.headers["request-id"],
    }
    with pytest.raises(anthropic.RateLimitError):
        anthropic_sdk(client).messages.create(
            model="citewell-agent",
            max_tokens=256,
            messages=[{"role": "user", "content": "How long do refunds take?"}],
        )


def test_once_the_place_is_free_the_request_is_served_again(client: TestClient) -> None:
    local = client.app.state.engine.generators["local"]  # type: ignore[attr-defined]
    with local.place():
        refused = client.post(
            "/v1/chat/completions",
            json={"model": "citewell-agent", "messages": [{"role": "user", "content": "Hi?"}]},
        )
        assert refused.status_code == 429
    # No bucket holds anything: the answer declines without reading the model.
    served = client.post(
        "/v1/chat/completions",
        json={"model": "citewell-agent", "messages": [{"role": "user", "content": "Hi?"}]},
    )
    assert served.status_code == 200, served.text
