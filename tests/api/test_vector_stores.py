"""OpenAI's Vector Stores API over buckets: a vector store is a bucket, its files are sources."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from citewell.api.deps import get_principal
from citewell.model import Permission, Principal
from tests.api.conftest import assert_error, upload

REFUNDS = b"# Refunds\n\nA refund is paid within thirty days of the request.\n"
HOLIDAYS = b"# Holidays\n\nEvery employee has twenty-five days of paid leave a year.\n"
DEVOLUCIONES = b"# Devoluciones\n\nEl reembolso se paga en un plazo de treinta dias.\n"


def ok(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def openai_file(client: TestClient, name: str, data: bytes, purpose: str = "assistants") -> str:
    made = ok(client.post("/v1/files", files={"file": (name, data)}, data={"purpose": purpose}))
    file_id: str = made["id"]
    return file_id


def vector_store(client: TestClient, **body: Any) -> dict[str, Any]:
    return ok(client.post("/v1/vector_stores", json=body))


def attach(client: TestClient, store: str, file_id: str, **body: Any) -> dict[str, Any]:
    return ok(client.post(f"/v1/vector_stores/{store}/files", json={"file_id": file_id, **body}))


def search(client: TestClient, store: str, **body: Any) -> dict[str, Any]:
    return ok(client.post(f"/v1/vector_stores/{store}/search", json=body))


@pytest.fixture
def store(client: TestClient) -> str:
    """An empty vector store's id."""
    made: str = vector_store(client, name="Policies")["id"]
    return made


def test_a_new_vector_store_is_a_new_empty_bucket(client: TestClient) -> None:
    made = vector_store(client, name="Policies", metadata={"team": "hr"})
    assert made == {
        "id": made["id"],
        "object": "vector_store",
        "created_at": made["created_at"],
        "name": "Policies",
        "usage_bytes": 0,
        "file_counts": {"in_progress": 0, "completed": 0, "failed": 0, "cancelled": 0, "total": 0},
        "status": "completed",
        "last_active_at": None,
        "metadata": {"team": "hr"},
        "expires_after": None,
        "expires_at": None,
    }
    bucket = ok(client.get(f"/v1/buckets/{made['id']}"))
    assert (bucket["name"], bucket["slug"][:3]) == ("Policies", "vs-")
    assert bucket["created_at"] == made["created_at"]
    assert ok(client.get(f"/v1/vector_stores/{made['id']}")) == made


def test_every_bucket_is_listed_as_a_vector_store_in_one_page(client: TestClient) -> None:
    assert client.post("/v1/buckets", json={"slug": "notes"}).status_code == 201
    made = vector_store(client)
    listed = ok(client.get("/v1/vector_stores"))
    assert {s["id"] for s in listed["data"]} == {
        made["id"],
        ok(client.get("/v1/buckets/notes"))["id"],
    }
    assert (listed["object"], listed["has_more"]) == ("list", False)
    assert (listed["first_id"], listed["last_id"]) == (
        listed["data"][0]["id"],
        listed["data"][-1]["id"],
    )
    named = {s["id"]: s["name"] for s in listed["data"]}
    assert named[made["id"]].startswith("vs-")  # no name given: the bucket's slug


def test_an_attached_file_is_ingested_as_a_source_with_its_attributes(
    client: TestClient, store: str
) -> None:
    file_id = openai_file(client, "refunds.md", REFUNDS)
    response = client.post(
        f"/v1/vector_stores/{store}/files",
        json={"file_id": file_id, "attributes": {"lang": "en", "year": 2024, "final": True}},
    )
    attached = ok(response)
    assert response.headers["openai-poll-after-ms"] == "200"
    assert attached == {
        "id": file_id,
        "object": "vector_store.file",
        "created_at": attached["created_at"],
        "vector_store_id": store,
        "status": "completed",
        "usage_bytes": len(REFUNDS),
        "last_error": None,
        "attributes": {"lang": "en", "year": 2024, "final": True},
        "chunking_strategy": {"type": "other"},
        "source_id": attached["source_id"],
        "filename": "refunds.md",
    }
    source = ok(client.get(f"/v1/sources/{attached['source_id']}"))
    assert source["bucket_id"] == store
    assert source["metadata"] == {"lang": "en", "year": 2024, "final": True, "file_id": file_id}
    polled = client.get(f"/v1/vector_stores/{store}/files/{file_id}")
    assert ok(polled) == attached and polled.headers["openai-poll-after-ms"] == "200"
    counted = ok(client.get(f"/v1/vector_stores/{store}"))
    assert counted["file_counts"] == {
        "in_progress": 0,
        "completed": 1,
        "failed": 0,
        "cancelled": 0,
        "total": 1,
    }
    assert counted["usage_bytes"] == len(REFUNDS)


def test_attaching_a_file_again_returns_it_unchanged(client: TestClient, store: str) -> None:
    file_id = openai_file(client, "refunds.md", REFUNDS)
    first = attach(client, store, file_id)
    assert attach(client, store, file_id) == first
    assert [f["id"] for f in ok(client.get(f"/v1/vector_stores/{store}/files"))["data"]] == [
        file_id
    ]


def test_a_second_file_with_the_same_bytes_is_a_conflict(client: TestClient, store: str) -> None:
    first = openai_file(client, "refunds.md", REFUNDS)
    attach(client, store, first)
    second = openai_file(client, "copy.md", REFUNDS)
    response = client.post(f"/v1/vector_stores/{store}/files", json={"file_id": second})
    error = assert_error(response, 409, code="conflict")
    assert first in error["message"] and error["param"] == "file_id"


def test_files_are_listed_newest_first_and_read_back_as_canonical_text(
    client: TestClient, store: str
) -> None:
    ids = [openai_file(client, n, d) for n, d in (("a.md", REFUNDS), ("b.md", HOLIDAYS))]
    for file_id in ids:
        attach(client, store, file_id)
    listed = ok(client.get(f"/v1/vector_stores/{store}/files"))
    assert sorted(f["id"] for f in listed["data"]) == sorted(ids)
    assert listed["has_more"] is False
    assert (
        ok(client.get(f"/v1/vector_stores/{store}/files", params={"filter": "failed"}))["data"]
        == []
    )
    content = ok(client.get(f"/v1/vector_stores/{store}/files/{ids[1]}/content"))
    assert content == {
        "object": "vector_store.file_content.page",
        "data": [{"type": "text", "text": content["data"][0]["text"]}],
        "has_more": False,
        "next_page": None,
    }
    assert "twenty-five days of paid leave" in content["data"][0]["text"]


def test_a_source_uploaded_to_the_bucket_is_a_file_under_its_own_id(
    client: TestClient, store: str
) -> None:
    made = upload(client, store, "holidays.md", HOLIDAYS, metadata='{"lang": "en"}').json()
    source_id = made["source"]["id"]
    (listed,) = ok(client.get(f"/v1/vector_stores/{store}/files"))["data"]
    assert (listed["id"], listed["source_id"], listed["attributes"]) == (
        source_id,
        source_id,
        {"lang": "en"},
    )
    assert ok(client.get(f"/v1/vector_stores/{store}/files/{source_id}")) == listed


def test_search_finds_the_passage_with_its_file_and_attributes(
    client: TestClient, store: str
) -> None:
    refunds = openai_file(client, "refunds.md", REFUNDS)
    attach(client, store, refunds, attributes={"lang": "en"})
    attach(client, store, openai_file(client, "holidays.md", HOLIDAYS))
    page = search(client, store, query="How long until a refund is paid?", max_num_results=1)
    assert set(page) == {"object", "search_query", "data", "has_more", "next_page"}
    assert (page["object"], page["has_more"], page["next_page"]) == (
        "vector_store.search_results.page",
        False,
        None,
    )
    assert page["search_query"] == ["How long until a refund is paid?"]
    (hit,) = page["data"]
    assert (hit["file_id"], hit["filename"], hit["attributes"]) == (
        refunds,
        "refunds.md",
        {"lang": "en"},
    )
    assert hit["content"] == [
        {"type": "text", "text": "Refunds\n\nA refund is paid within thirty days of the request."}
    ]
    assert 0 <= hit["score"] <= 1
    assert hit["source_id"].startswith("src_") and hit["chunk_id"].startswith("chk_")
    assert client.get(hit["access_url"]).content == REFUNDS  # a signed link to the original


def test_search_filters_on_attributes_in_openais_format(client: TestClient, store: str) -> None:
    attach(client, store, openai_file(client, "refunds.md", REFUNDS), attributes={"lang": "en"})
    spanish = openai_file(client, "devoluciones.md", DEVOLUCIONES)
    attach(client, store, spanish, attributes={"lang": "es"})
    only_es = {"type": "eq", "key": "lang", "value": "es"}
    page = search(client, store, query="refund thirty days", filters=only_es)
    assert {hit["file_id"] for hit in page["data"]} == {spanish}
    either = {"type": "or", "filters": [only_es, {"type": "eq", "key": "lang", "value": "en"}]}
    assert len(search(client, store, query="refund thirty days", filters=either)["data"]) == 2
    by_file = {"type": "eq", "key": "file_id", "value": spanish}
    assert {
        h["file_id"] for h in search(client, store, query="refund", filters=by_file)["data"]
    } == {spanish}


def test_a_score_threshold_leaves_out_the_lower_results(client: TestClient, store: str) -> None:
    for name, data in (("a.md", REFUNDS), ("b.md", HOLIDAYS), ("c.md", DEVOLUCIONES)):
        attach(client, store, openai_file(client, name, data))
    scores = [h["score"] for h in search(client, store, query="refund days")["data"]]
    assert len(scores) == 3 and scores == sorted(scores, reverse=True)
    threshold = (scores[0] + scores[1]) / 2
    kept = search(
        client, store, query="refund days", ranking_options={"score_threshold": threshold}
    )
    assert [h["score"] for h in kept["data"]] == scores[:1]


def test_a_list_of_queries_is_searched_together_and_echoed(client: TestClient, store: str) -> None:
    attach(client, store, openai_file(client, "refunds.md", REFUNDS))
    attach(client, store, openai_file(client, "holidays.md", HOLIDAYS))
    page = search(client, store, query=["refund", "paid leave"])
    assert page["search_query"] == ["refund", "paid leave"]
    assert {hit["filename"] for hit in page["data"]} == {"refunds.md", "holidays.md"}


def test_a_vector_store_is_renamed_and_its_metadata_replaced(
    client: TestClient, store: str
) -> None:
    renamed = ok(client.post(f"/v1/vector_stores/{store}", json={"name": "Rules"}))
    assert (renamed["name"], renamed["metadata"]) == ("Rules", {})
    assert ok(client.get(f"/v1/buckets/{store}"))["name"] == "Rules"
    tagged = ok(client.post(f"/v1/vector_stores/{store}", json={"metadata": {"team": "hr"}}))
    assert (tagged["name"], tagged["metadata"]) == ("Rules", {"team": "hr"})
    cleared = ok(client.post(f"/v1/vector_stores/{store}", json={"metadata": None}))
    assert (cleared["name"], cleared["metadata"]) == ("Rules", {})
    assert ok(client.get(f"/v1/vector_stores/{store}"))["name"] == "Rules"


def test_a_key_acts_only_within_its_permissions(client: TestClient, store: str) -> None:
    file_id = openai_file(client, "refunds.md", REFUNDS)
    searcher = Principal(sees_all_labels=True, permissions=frozenset({Permission.SEARCH}))
    client.app.dependency_overrides[get_principal] = lambda: searcher  # type: ignore[attr-defined]
    refused = [
        client.post("/v1/vector_stores", json={"name": "x"}),
        client.post(f"/v1/vector_stores/{store}", json={"name": "x"}),
        client.delete(f"/v1/vector_stores/{store}"),
        client.post(f"/v1/vector_stores/{store}/files", json={"file_id": file_id}),
        client.delete(f"/v1/files/{file_id}"),
    ]
    for response in refused:
        assert_error(response, 403, code="permission_denied")
    assert search(client, store, query="refund")["data"] == []
    assert ok(client.get(f"/v1/vector_stores/{store}"))["name"] == "Policies"


def test_file_ids_given_at_creation_are_attached(client: TestClient) -> None:
    ids = [openai_file(client, "a.md", REFUNDS), openai_file(client, "b.md", HOLIDAYS)]
    made = vector_store(client, name="Both", file_ids=ids)
    assert made["file_counts"]["completed"] == 2
    assert made["usage_bytes"] == len(REFUNDS) + len(HOLIDAYS)


def test_a_refused_creation_leaves_no_vector_store(client: TestClient) -> None:
    good = openai_file(client, "a.md", REFUNDS)
    unknown = "file_000000000000000000000000"
    response = client.post("/v1/vector_stores", json={"file_ids": [good, unknown]})
    assert assert_error(response, 404, code="not_found")["param"] == "file_id"
    garbage = openai_file(client, "blob.bin", bytes(range(256)) * 4)
    assert_error(client.post("/v1/vector_stores", json={"file_ids": [good, garbage]}), 415)
    assert ok(client.get("/v1/vector_stores"))["data"] == []


def test_removing_a_file_deletes_its_source_and_keeps_the_upload(
    client: TestClient, store: str
) -> None:
    file_id = openai_file(client, "refunds.md", REFUNDS)
    source_id = attach(client, store, file_id)["source_id"]
    deleted = ok(client.delete(f"/v1/vector_stores/{store}/files/{file_id}"))
    assert deleted == {"id": file_id, "object": "vector_store.file.deleted", "deleted": True}
    assert_error(client.get(f"/v1/sources/{source_id}"), 404)
    assert_error(client.get(f"/v1/vector_stores/{store}/files/{file_id}"), 404)
    assert ok(client.get(f"/v1/files/{file_id}"))["id"] == file_id


def test_deleting_an_uploaded_file_removes_it_from_every_vector_store(client: TestClient) -> None:
    file_id = openai_file(client, "refunds.md", REFUNDS)
    stores = [vector_store(client, file_ids=[file_id])["id"] for _ in range(2)]
    assert ok(client.delete(f"/v1/files/{file_id}")) == {
        "id": file_id,
        "object": "file",
        "deleted": True,
    }
    for store in stores:
        assert ok(client.get(f"/v1/vector_stores/{store}"))["file_counts"]["total"] == 0
        assert search(client, store, query="refund")["data"] == []


def test_deleting_a_vector_store_deletes_its_bucket_and_sources(
    client: TestClient, store: str
) -> None:
    file_id = openai_file(client, "refunds.md", REFUNDS)
    source_id = attach(client, store, file_id)["source_id"]
    deleted = ok(client.delete(f"/v1/vector_stores/{store}"))
    assert deleted == {"id": store, "object": "vector_store.deleted", "deleted": True}
    assert_error(client.get(f"/v1/buckets/{store}"), 404)
    assert_error(client.get(f"/v1/sources/{source_id}"), 404)
    assert ok(client.get(f"/v1/files/{file_id}"))["id"] == file_id


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/vector_stores/bkt_nope", None),
        ("POST", "/v1/vector_stores/bkt_nope", {"name": "x"}),
        ("DELETE", "/v1/vector_stores/bkt_nope", None),
        ("GET", "/v1/vector_stores/bkt_nope/files", None),
        ("POST", "/v1/vector_stores/bkt_nope/files", {"file_id": "file_x"}),
        ("POST", "/v1/vector_stores/bkt_nope/search", {"query": "refund"}),
    ],
)
def test_an_unknown_vector_store_is_not_found(
    client: TestClient, method: str, path: str, body: dict[str, Any] | None
) -> None:
    error = assert_error(client.request(method, path, json=body), 404, code="not_found")
    assert error["param"] == "vector_store_id"
    assert error["message"] == "No vector store found with id 'bkt_nope'."


def test_an_unknown_file_is_not_found(client: TestClient, store: str) -> None:
    for response in (
        client.post(f"/v1/vector_stores/{store}/files", json={"file_id": "file_nope"}),
        client.get(f"/v1/vector_stores/{store}/files/file_nope"),
        client.delete(f"/v1/vector_stores/{store}/files/file_nope"),
    ):
        assert assert_error(response, 404, code="not_found")["param"] == "file_id"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"query": ""}, "query"),
        ({"query": []}, "query"),
        ({"query": ["x" * 3000, "y" * 3000]}, None),
        ({"query": "refund", "max_num_results": 0}, "max_num_results"),
        ({"query": "refund", "max_num_results": 51}, "max_num_results"),
        ({"query": "refund", "ranking_options": {"score_threshold": 1.5}}, None),
        ({"query": "refund", "ranking_options": {"ranker": "best"}}, None),
        ({"query": "refund", "filters": {"type": "like", "key": "a", "value": "b"}}, None),
        ({"query": "refund", "stream": True}, "stream"),
    ],
)
def test_a_bad_search_is_refused(
    client: TestClient, store: str, body: dict[str, Any], param: str | None
) -> None:
    error = assert_error(client.post(f"/v1/vector_stores/{store}/search", json=body), 400)
    if param is not None:
        assert error["param"] == param


@pytest.mark.parametrize(
    "body",
    [
        {"expires_after": {"anchor": "last_active_at", "days": 7}},
        {"metadata": {"k": "v" * 513}},
        {"name": 5},
        {"file_ids": "file_x"},
    ],
)
def test_a_bad_vector_store_is_refused(client: TestClient, body: dict[str, Any]) -> None:
    assert_error(client.post("/v1/vector_stores", json=body), 400)
    assert ok(client.get("/v1/vector_stores"))["data"] == []


@pytest.mark.parametrize(
    ("attributes", "param"),
    [
        ({"file_id": "mine"}, "attributes.file_id"),
        ({f"k{i}": i for i in range(17)}, "attributes"),
        ({"k": ["a", "list"]}, None),
        ({"k": "v" * 513}, None),
    ],
)
def test_bad_attributes_are_refused(
    client: TestClient, store: str, attributes: dict[str, Any], param: str | None
) -> None:
    file_id = openai_file(client, "refunds.md", REFUNDS)
    response = client.post(
        f"/v1/vector_stores/{store}/files", json={"file_id": file_id, "attributes": attributes}
    )
    error = assert_error(response, 400)
    if param is not None:
        assert error["param"] == param
    assert ok(client.get(f"/v1/vector_stores/{store}"))["file_counts"]["total"] == 0


def test_a_file_citewell_cannot_read_is_refused_not_kept_as_failed(
    client: TestClient, store: str
) -> None:
    garbage = openai_file(client, "blob.bin", bytes(range(256)) * 4)
    response = client.post(f"/v1/vector_stores/{store}/files", json={"file_id": garbage})
    assert assert_error(response, 415, code="unsupported_file")["param"] == "file"
    broken = openai_file(client, "broken.pdf", b"%PDF-1.7\n" + b"\x00garbage" * 50)
    assert_error(client.post(f"/v1/vector_stores/{store}/files", json={"file_id": broken}), 422)
    assert ok(client.get(f"/v1/vector_stores/{store}/files"))["data"] == []
    assert ok(client.get("/healthz")) == {"status": "ok"}
