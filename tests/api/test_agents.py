"""/v1/agents: a tenant's own agents, their scope and policy, and where clients see them."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import ADMIN, assert_error, auth, upload


@pytest.fixture
def keyed(keyed: TestClient) -> TestClient:
    """The operator's client, whose default tenant has two buckets, 'policies' and 'menus'."""
    keyed.headers.update(auth(ADMIN))
    for slug, name, text in (
        ("policies", "refunds.txt", b"Refunds are paid within thirty days of the request."),
        ("menus", "lunch.txt", b"Lunch is served from noon until two in the afternoon."),
    ):
        assert keyed.post("/v1/buckets", json={"slug": slug}).status_code == 201
        assert upload(keyed, slug, name, text).status_code == 201
    return keyed


def ask(client: TestClient, model: str, question: str, **headers: str) -> Any:
    body = {"model": model, "input": question, "include": ["file_search_call.results"]}
    return client.post("/v1/responses", json=body, headers=headers)


def test_an_agent_answers_from_its_own_buckets_only(keyed: TestClient) -> None:
    made = keyed.post("/v1/agents", json={"name": "policy-desk", "bucket_ids": ["policies"]})
    assert made.status_code == 201, made.text
    agent = made.json()
    policies = keyed.get("/v1/buckets/policies").json()["id"]
    assert (agent["id"], agent["object"], agent["configured"]) == ("policy-desk", "agent", False)
    assert agent["bucket_ids"] == [policies]  # kept as ids: renaming the bucket keeps the scope
    answer = ask(keyed, "policy-desk", "When is lunch served?").json()
    assert answer["metadata"]["grounded_sources_state"] == "missing"
    results = answer["output"][0]["results"]
    assert {r["filename"] for r in results} == {"refunds.txt"}
    refunds = ask(keyed, "policy-desk", "How long do refunds take?").json()
    assert refunds["output"][-1]["content"][0]["annotations"][0]["filename"] == "refunds.txt"


def test_agents_appear_in_models_and_the_list_after_the_configured_ones(
    keyed: TestClient,
) -> None:
    keyed.post("/v1/agents", json={"name": "b-agent", "description": "second"})
    keyed.post("/v1/agents", json={"name": "a-agent", "show_sources": False})
    listed = keyed.get("/v1/agents").json()["data"]
    assert [(a["id"], a["configured"]) for a in listed] == [
        ("citewell-agent", True),
        ("b-agent", False),
        ("a-agent", False),
    ]
    models = keyed.get("/v1/models").json()["data"]
    assert [m["id"] for m in models] == ["citewell-agent", "b-agent", "a-agent"]
    assert keyed.get("/v1/models/b-agent").json()["description"] == "second"
    hidden = ask(keyed, "a-agent", "How long do refunds take?").json()
    assert hidden["metadata"]["grounded_sources_state"] == "hidden"
    assert hidden["output"][-1]["content"][0]["annotations"] == []


def test_an_agent_is_changed_field_by_field_and_deleted(keyed: TestClient) -> None:
    keyed.post("/v1/agents", json={"name": "desk", "max_sources": 2, "strict": True})
    changed = keyed.post("/v1/agents/desk", json={"refusal": "Ask the front desk."})
    assert changed.status_code == 200, changed.text
    body = changed.json()
    assert (body["refusal"], body["max_sources"], body["strict"]) == (
        "Ask the front desk.",
        2,
        True,
    )
    refused = ask(keyed, "desk", "What colour is the sky on Mars?").json()
    assert refused["output"][-1]["content"][0]["text"] == "Ask the front desk."
    assert keyed.delete("/v1/agents/desk").json() == {
        "id": "desk",
        "object": "agent.deleted",
        "deleted": True,
    }
    assert_error(keyed.get("/v1/models/desk"), 404, code="model_not_found")
    assert_error(keyed.delete("/v1/agents/desk"), 404)


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"name": "citewell-agent"}, 409, "name"),
        ({"name": "bad name!"}, 400, "name"),
        ({"name": "x", "generator": "gpt-9"}, 400, "generator"),
        ({"name": "x", "bucket_ids": ["nope"]}, 404, "bucket"),
        ({"name": "x", "max_sources": 0}, 400, "max_sources"),
        ({"name": "x", "colour": "red"}, 400, "colour"),
    ],
)
def test_bad_agents_are_refused_and_nothing_is_kept(
    keyed: TestClient, body: dict[str, Any], status: int, param: str
) -> None:
    error = assert_error(keyed.post("/v1/agents", json=body), status)
    assert error["param"] == param
    assert [a["id"] for a in keyed.get("/v1/agents").json()["data"]] == ["citewell-agent"]


def test_configured_agents_cannot_change_and_updates_are_checked(keyed: TestClient) -> None:
    assert_error(keyed.post("/v1/agents/citewell-agent", json={"strict": True}), 409)
    assert_error(keyed.delete("/v1/agents/citewell-agent"), 409)
    keyed.post("/v1/agents", json={"name": "desk"})
    error = assert_error(keyed.post("/v1/agents/desk", json={"max_passages": 500}), 400)
    assert error["param"] == "max_passages"
    assert_error(keyed.post("/v1/agents/desk", json={"name": "other"}), 400)
    assert keyed.get("/v1/agents/desk").json()["max_passages"] == 8


def test_agents_belong_to_their_tenant_and_need_manage(keyed: TestClient) -> None:
    keyed.post("/v1/agents", json={"name": "desk", "bucket_ids": ["policies"]})
    tenant = keyed.post("/v1/tenants", json={"name": "Acme"}).json()["id"]
    acme = keyed.post(
        "/v1/keys", json={"permissions": ["ask", "manage"], "tenant_id": tenant}
    ).json()["secret"]
    other = {"authorization": f"Bearer {acme}"}
    assert [a["id"] for a in keyed.get("/v1/agents", headers=other).json()["data"]] == [
        "citewell-agent"
    ]
    assert_error(ask(keyed, "desk", "refunds?", **other), 404, code="model_not_found")
    reader = keyed.post("/v1/keys", json={"permissions": ["ask"]}).json()["secret"]
    denied = keyed.post(
        "/v1/agents", json={"name": "mine"}, headers={"authorization": f"Bearer {reader}"}
    )
    assert assert_error(denied, 403)["code"] == "permission_denied"


def test_an_agent_that_redacts_never_shows_the_masked_data(keyed: TestClient) -> None:
    contact = "Refund questions go to refunds.desk@example.com within thirty days."
    assert upload(keyed, "policies", "contact.txt", contact.encode()).status_code == 201
    made = keyed.post("/v1/agents", json={"name": "masked", "redact": ["email", "phone"]})
    assert made.json()["redact"] == ["email", "phone"]
    for stream in (False, True):
        body = {
            "model": "masked",
            "input": "Where do refund questions go?",
            "include": ["file_search_call.results"],
            "stream": stream,
        }
        sent = keyed.post("/v1/responses", json=body)
        assert sent.status_code == 200, sent.text
        assert "refunds.desk@example.com" not in sent.text
        assert "█" * len("refunds.desk@example.com") in sent.text
    answer = ask(keyed, "masked", "Where do refund questions go?").json()
    part = answer["output"][-1]["content"][0]
    masked = contact.replace("refunds.desk@example.com", "█" * 24)
    assert part["text"] == masked
    [citation] = part["annotations"]
    assert citation["cited_text"] == masked
    assert part["text"][citation["start_index"] : citation["end_index"]] == masked
    plain = ask(keyed, "citewell-agent", "Where do refund questions go?").json()
    assert plain["output"][-1]["content"][0]["text"] == contact  # other agents show it
    bad = keyed.post("/v1/agents", json={"name": "x", "redact": ["passport"]})
    assert assert_error(bad, 400)["param"] == "redact[0]"
