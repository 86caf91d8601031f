"""GET /v1/models: the agents, as OpenAI lists models."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.answering import AGENTS, answering, scripted
from tests.api.conftest import assert_error

__all__ = ["answering", "scripted"]  # fixtures


def test_the_default_app_lists_the_default_agent(client: TestClient) -> None:
    listed = client.get("/v1/models").json()
    created = listed["data"][0]["created"]
    assert listed == {
        "object": "list",
        "data": [
            {
                "id": "citewell-agent",
                "object": "model",
                "created": created,
                "owned_by": "citewell",
                "description": "",
            }
        ],
        "first_id": "citewell-agent",
        "last_id": "citewell-agent",
        "has_more": False,
    }


def test_configured_agents_are_listed_in_order(answering: TestClient) -> None:
    listed = answering.get("/v1/models").json()
    assert [m["id"] for m in listed["data"]] == [a.name for a in AGENTS]
    assert answering.get("/v1/models/hidden").json()["id"] == "hidden"


def test_an_unknown_model_is_not_found(client: TestClient) -> None:
    error = assert_error(client.get("/v1/models/gpt-4o"), 404, code="model_not_found")
    assert error["param"] == "model"
