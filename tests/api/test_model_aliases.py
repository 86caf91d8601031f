"""Model aliases: an app written for OpenAI or Claude names its usual model, and an agent answers
(``Settings.model_aliases``, off by default); the response's ``model`` says which agent."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest
from fastapi.testclient import TestClient

from citewell.api import create_app
from citewell.config import Settings
from tests.api.conftest import upload

ALIASES = {"gpt-4o": "citewell-agent", "claude-*": "citewell-agent", "o3": "no-such-agent"}


@pytest.fixture
def aliased(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings.model_copy(update={"model_aliases": ALIASES}))) as client:
        client.post("/v1/buckets", json={"slug": "notes"})
        upload(client, "notes", "refunds.txt", b"Refunds take thirty days.")
        yield client


def sdks(client: TestClient) -> tuple[openai.OpenAI, anthropic.Anthropic]:
    return (
        openai.OpenAI(api_key="x", base_url=f"{client.base_url}/v1", http_client=client),
        anthropic.Anthropic(api_key="x", base_url=str(client.base_url), http_client=client),
    )


def test_an_aliased_model_is_answered_by_its_agent_on_every_surface(aliased: TestClient) -> None:
    oai, claude = sdks(aliased)
    question = "How long do refunds take?"
    response = oai.responses.create(model="gpt-4o", input=question)
    assert response.model == "citewell-agent"
    assert "thirty days" in response.output_text
    chat = oai.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": question}]
    )
    assert chat.model == "citewell-agent"
    message = claude.messages.create(
        model="claude-sonnet-4-5", max_tokens=200, messages=[{"role": "user", "content": question}]
    )
    assert message.model == "citewell-agent"
    with oai.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": question}], stream=True
    ) as stream:
        assert {chunk.model for chunk in stream} == {"citewell-agent"}


def test_a_name_no_alias_matches_or_one_aliased_to_no_agent_is_404(aliased: TestClient) -> None:
    oai, claude = sdks(aliased)
    for model in ("gpt-4o-mini", "o3"):
        with pytest.raises(openai.NotFoundError):
            oai.responses.create(model=model, input="Refunds?")
    with pytest.raises(anthropic.NotFoundError):
        claude.messages.create(
            model="sonnet", max_tokens=20, messages=[{"role": "user", "content": "Refunds?"}]
        )


def test_without_aliases_another_services_model_is_404(client: TestClient) -> None:
    oai, claude = sdks(client)
    with pytest.raises(openai.NotFoundError):
        oai.responses.create(model="gpt-4o", input="Refunds?")
    with pytest.raises(anthropic.NotFoundError):
        claude.messages.create(
            model="claude-sonnet-4-5", max_tokens=20, messages=[{"role": "user", "content": "x"}]
        )


def test_aliases_come_from_the_environment_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CITEWELL_MODEL_ALIASES", '{"*": "citewell-agent"}')
    assert Settings().model_aliases == {"*": "citewell-agent"}
