"""API keys and tenants: who may call, and what each key allows."""

from __future__ import annotations

import anthropic
import openai
import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import ADMIN, assert_error, auth, make_key, upload


def test_without_a_key_a_keyed_server_answers_401_in_each_dialect(keyed: TestClient) -> None:
    missing = keyed.get("/v1/buckets")
    assert missing.headers["www-authenticate"] == "Bearer"
    error = assert_error(missing, 401)
    assert error["message"].startswith("You didn't provide an API key.")
    wrong = assert_error(keyed.get("/v1/buckets", headers=auth("sk-guess")), 401)
    assert (wrong["code"], wrong["message"]) == ("invalid_api_key", "Incorrect API key provided.")
    sent = keyed.post("/v1/messages", json={}, headers={"x-api-key": "nope"})
    assert sent.status_code == 401
    assert sent.json()["error"]["type"] == "authentication_error"
    assert keyed.get("/healthz").status_code == 200  # health needs no key


@pytest.mark.parametrize("key", [b"operator-s\xc3\xa9cret", b"\xe9", b"cwk_\xe9\xe9"])
def test_a_key_of_non_ascii_characters_is_refused_like_any_wrong_key(
    keyed: TestClient, key: bytes
) -> None:
    for header in (b"authorization", b"x-api-key"):
        value = b"Bearer " + key if header == b"authorization" else key
        wrong = assert_error(keyed.get("/v1/buckets", headers={header: value}), 401)
        assert wrong["message"] == "Incorrect API key provided."
    assert keyed.get("/v1/buckets", headers=auth(ADMIN)).status_code == 200


def test_a_new_key_shows_its_secret_once_and_works(keyed: TestClient) -> None:
    key = make_key(keyed, permissions=["search", "manage"], name="portal")
    assert key["id"].startswith("key_") and key["object"] == "api_key"
    assert key["secret"].startswith(f"cwk_{key['id'].removeprefix('key_')}_")
    assert (key["tenant_id"], key["permissions"], key["name"]) == (
        "default",
        ["manage", "search"],
        "portal",
    )
    assert key["bucket_ids"] is None and key["acl_labels"] is None and key["revoked_at"] is None
    listed = keyed.get("/v1/keys", headers=auth(key["secret"])).json()["data"]
    assert [(k["id"], k["secret"]) for k in listed] == [(key["id"], None)]
    assert keyed.get("/v1/buckets", headers={"x-api-key": key["secret"]}).status_code == 200


def test_each_permission_is_required_where_it_applies(keyed: TestClient) -> None:
    searcher = make_key(keyed, permissions=["search"])["secret"]
    denied = assert_error(
        keyed.post("/v1/buckets", json={"slug": "x"}, headers=auth(searcher)), 403
    )
    assert denied["code"] == "permission_denied"
    assert "lacks the 'manage' permission" in denied["message"]
    answer = keyed.post("/v1/responses", json={"input": "hi"}, headers=auth(searcher))
    assert "'ask' permission" in assert_error(answer, 403)["message"]
    message = keyed.post(
        "/v1/messages",
        json={"model": "citewell-agent", "max_tokens": 5, "messages": []},
        headers={"x-api-key": searcher, "anthropic-version": "2023-06-01"},
    )
    assert (message.status_code, message.json()["error"]["type"]) == (403, "permission_error")
    assert keyed.post("/v1/buckets", json={"slug": "notes"}, headers=auth(ADMIN)).status_code == 201
    query = {"query": "q", "buckets": ["notes"]}
    assert keyed.post("/v1/search", json=query, headers=auth(searcher)).status_code == 200


def test_a_key_grants_no_more_than_it_holds(keyed: TestClient) -> None:
    manager = make_key(keyed, permissions=["manage", "search"])["secret"]
    wider = keyed.post("/v1/keys", json={"permissions": ["ask"]}, headers=auth(manager))
    assert "cannot grant permissions it lacks: ask" in assert_error(wider, 403)["message"]
    elsewhere = keyed.post(
        "/v1/keys", json={"permissions": ["search"], "tenant_id": "default"}, headers=auth(manager)
    )
    assert elsewhere.status_code == 201  # its own tenant, named
    assert assert_error(keyed.get("/v1/tenants", headers=auth(manager)), 403)
    tenant = keyed.post("/v1/tenants", json={"name": "Acme"}, headers=auth(ADMIN)).json()
    foreign = keyed.post(
        "/v1/keys",
        json={"permissions": ["search"], "tenant_id": tenant["id"]},
        headers=auth(manager),
    )
    assert "its own tenant" in assert_error(foreign, 403)["message"]


def test_the_operator_bootstraps_a_tenant_that_sees_nothing_of_others(keyed: TestClient) -> None:
    assert keyed.post("/v1/buckets", json={"slug": "shop"}, headers=auth(ADMIN)).status_code == 201
    tenant = keyed.post("/v1/tenants", json={"name": "Acme"}, headers=auth(ADMIN))
    assert tenant.status_code == 201
    acme = tenant.json()
    assert acme["id"].startswith("ten_") and acme["name"] == "Acme"
    names = [t["name"] for t in keyed.get("/v1/tenants", headers=auth(ADMIN)).json()["data"]]
    assert names == ["Default", "Acme"]
    owner = make_key(keyed, tenant_id=acme["id"], permissions=["manage", "ingest", "search"])
    assert owner["tenant_id"] == acme["id"]
    headers = auth(owner["secret"])
    assert keyed.get("/v1/buckets", headers=headers).json()["data"] == []
    assert_error(keyed.get("/v1/buckets/shop", headers=headers), 404)
    assert keyed.post("/v1/buckets", json={"slug": "shop"}, headers=headers).status_code == 201
    assert [k["id"] for k in keyed.get("/v1/keys", headers=headers).json()["data"]] == [owner["id"]]
    default_keys = keyed.get("/v1/keys", headers=auth(ADMIN)).json()["data"]
    assert owner["id"] not in [k["id"] for k in default_keys]
    assert_error(
        keyed.get(
            f"/v1/keys/{owner['id']}",
            headers=auth(make_key(keyed, permissions=["manage"])["secret"]),
        ),
        404,
    )


def test_a_revoked_key_is_refused_and_stays_listed(keyed: TestClient) -> None:
    key = make_key(keyed, permissions=["search"])
    revoked = keyed.delete(f"/v1/keys/{key['id']}", headers=auth(ADMIN))
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    refused = assert_error(keyed.get("/v1/buckets", headers=auth(key["secret"])), 401)
    assert refused["message"] == f"The API key {key['id']} has been revoked."
    again = keyed.delete(f"/v1/keys/{key['id']}", headers=auth(ADMIN)).json()
    assert again["revoked_at"] == revoked.json()["revoked_at"]
    tampered = key["secret"][:-1] + ("A" if key["secret"][-1] != "A" else "B")
    assert assert_error(keyed.get("/v1/buckets", headers=auth(tampered)), 401)


def test_bucket_restriction_and_acl_labels_hold(keyed: TestClient) -> None:
    for slug in ("open", "closed"):
        keyed.post("/v1/buckets", json={"slug": slug}, headers=auth(ADMIN))
    keyed.headers.update(auth(ADMIN))
    assert (
        upload(keyed, "open", "team.txt", b"The launch is on Friday.", acl='["team"]').status_code
        == 201
    )
    assert upload(keyed, "open", "all.txt", b"The office opens at nine.").status_code == 201
    keyed.headers.pop("authorization")
    key = make_key(keyed, permissions=["search"], bucket_ids=["open"], acl_labels=["other"])
    headers = auth(key["secret"])
    assert key["bucket_ids"] == [keyed.get("/v1/buckets/open", headers=headers).json()["id"]]
    assert [b["slug"] for b in keyed.get("/v1/buckets", headers=headers).json()["data"]] == ["open"]
    assert_error(keyed.get("/v1/buckets/closed", headers=headers), 404)
    manager = make_key(keyed, permissions=["manage", "search"], bucket_ids=["open"])["secret"]
    created = keyed.post("/v1/buckets", json={"slug": "new"}, headers=auth(manager))
    assert "cannot create buckets" in assert_error(created, 403)["message"]
    assert "new" not in [
        b["slug"] for b in keyed.get("/v1/buckets", headers=auth(ADMIN)).json()["data"]
    ]
    files = [
        s["filename"] for s in keyed.get("/v1/buckets/open/sources", headers=headers).json()["data"]
    ]
    assert files == ["all.txt"]
    query = {"query": "When is the launch?", "buckets": ["open"]}
    found = keyed.post("/v1/search", json=query, headers=headers).json()
    assert [r["filename"] for r in found["data"]] == ["all.txt"]
    closed = {"query": "When is the launch?", "buckets": ["closed"]}
    assert_error(keyed.post("/v1/search", json=closed, headers=headers), 404)


def test_an_open_server_serves_the_local_user_but_checks_citewell_keys(
    client: TestClient,
) -> None:
    assert client.get("/v1/buckets", headers=auth("anything")).status_code == 200
    key = make_key(client, token="anything", permissions=["search"])
    limited = client.post("/v1/buckets", json={"slug": "x"}, headers=auth(key["secret"]))
    assert_error(limited, 403)
    assert_error(client.get("/v1/buckets", headers=auth(key["secret"] + "x")), 401)


def test_the_sdks_raise_their_own_errors(keyed: TestClient) -> None:
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(
            api_key="wrong", base_url=f"{keyed.base_url}/v1", http_client=keyed
        ).models.list()
    asker = make_key(keyed, permissions=["search"])["secret"]
    client = anthropic.Anthropic(api_key=asker, base_url=str(keyed.base_url), http_client=keyed)
    with pytest.raises(anthropic.PermissionDeniedError):
        client.messages.create(
            model="citewell-agent", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
