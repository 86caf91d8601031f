"""OpenAI's Vector Stores API over buckets: a vector store is a bucket, its files are sources."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from citewell.api import create_app
from citewell.api.deps import get_principal
from citewell.config import OcrSettings, Settings
from citewell.errors import ParseError
from citewell.ingest.ocr import PageImage, PageText, Recogniser
from citewell.library import Library
from citewell.model import Permission, Principal, Source
from citewell.store.base import SourceDraft
from tests.api.conftest import assert_error, two_scans, upload

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


# files read with OCR -------------------------------------------------------------------------
DOCLING = "Docling bundles PDF document conversion to JSON and Markdown"
"""The sentence of the scanned page ``pdf_scanned/docling_ocr_test.pdf``."""
ERASE = "To erase a wrong note, simply hold ERASE"
"""A sentence of the LinnSequencer leaflet, ``pdf_scanned/ocrmypdf_linn.pdf``."""


@dataclass
class OcrGate:
    """Pages wait for OCR until the test opens the gate; then the next pages fail, one for each
    message in ``failures``, and the others are read."""

    opened: threading.Event = field(default_factory=threading.Event)
    failures: list[str] = field(default_factory=list)


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[OcrGate]:
    held = OcrGate()
    read_page = Recogniser._read_page

    def gated(self: Recogniser, page: PageImage) -> PageText:
        assert held.opened.wait(timeout=60), "the test never opened the gate"
        if held.failures:
            raise ParseError(held.failures.pop(0))
        return read_page(self, page)

    monkeypatch.setattr(Recogniser, "_read_page", gated)
    yield held
    held.opened.set()  # a test that failed early must not leave OCR waiting


def scan(documents: Path) -> bytes:
    """A PDF of one scanned page: one sentence (``DOCLING``)."""
    return (documents / "pdf_scanned" / "docling_ocr_test.pdf").read_bytes()


def settled(client: TestClient, store: str, file_id: str) -> dict[str, Any]:
    """GET the file until it is no longer in progress (the test does not time it)."""
    for _ in range(600):
        file = ok(client.get(f"/v1/vector_stores/{store}/files/{file_id}"))
        if file["status"] != "in_progress":
            return file
        time.sleep(0.1)
    raise AssertionError(f"{file_id} still in progress")


def listed(client: TestClient, store: str, status: str | None = None) -> list[str]:
    params = {"filter": status} if status else {}
    files = ok(client.get(f"/v1/vector_stores/{store}/files", params=params))["data"]
    return [f["id"] for f in files]


def counted(client: TestClient, store: str) -> tuple[str, dict[str, int]]:
    """The vector store's status and file counts."""
    made = ok(client.get(f"/v1/vector_stores/{store}"))
    return made["status"], made["file_counts"]


def counts(in_progress: int = 0, completed: int = 0, failed: int = 0) -> dict[str, int]:
    return {
        "in_progress": in_progress,
        "completed": completed,
        "failed": failed,
        "cancelled": 0,
        "total": in_progress + completed + failed,
    }


def test_a_scan_is_in_progress_until_stored_then_completed_and_found_on_its_page(
    client: TestClient, store: str, documents: Path, gate: OcrGate
) -> None:
    scans = two_scans(documents)
    file_id = openai_file(client, "scans.pdf", scans)
    response = client.post(
        f"/v1/vector_stores/{store}/files", json={"file_id": file_id, "attributes": {"k": "v"}}
    )
    attached = ok(response)
    assert response.headers["openai-poll-after-ms"] == "200"
    assert attached == {
        "id": file_id,
        "object": "vector_store.file",
        "created_at": attached["created_at"],
        "vector_store_id": store,
        "status": "in_progress",
        "usage_bytes": 0,
        "last_error": None,
        "attributes": {"k": "v"},
        "chunking_strategy": {"type": "other"},
        "source_id": attached["source_id"],
        "filename": "scans.pdf",
    }
    # While its pages wait for OCR, the file is listed and counted, and nothing of it is
    # searched: its source is stored all at once, at the end.
    assert ok(client.get(f"/v1/vector_stores/{store}/files/{file_id}")) == attached
    source = ok(client.get(f"/v1/sources/{attached['source_id']}"))
    assert (source["status"], source["progress"]) == (
        "processing",
        {"pages_done": 0, "pages_total": 2},
    )
    assert counted(client, store) == ("in_progress", counts(in_progress=1))
    assert (listed(client, store, "in_progress"), listed(client, store, "completed")) == (
        [file_id],
        [],
    )
    assert search(client, store, query=ERASE)["data"] == []

    gate.opened.set()
    done = settled(client, store, file_id)
    assert done == {
        **attached,
        "created_at": done["created_at"],
        "status": "completed",
        "usage_bytes": len(scans),
    }
    assert counted(client, store) == ("completed", counts(completed=1))
    assert (listed(client, store, "in_progress"), listed(client, store, "completed")) == (
        [],
        [file_id],
    )
    for sentence, page_number in ((DOCLING, 1), (ERASE, 2)):
        hit = search(client, store, query=sentence)["data"][0]
        assert (hit["file_id"], hit["source_id"], hit["attributes"]) == (
            file_id,
            attached["source_id"],
            {"k": "v"},
        )
        assert " ".join(hit["content"][0]["text"].split()).startswith(sentence)
        assert hit["page_number"] == page_number


def test_a_file_in_progress_has_no_content_stays_and_holds_its_bytes(
    client: TestClient, store: str, documents: Path, gate: OcrGate
) -> None:
    file_id = openai_file(client, "scan.pdf", scan(documents))
    attached = attach(client, store, file_id)
    assert attached["status"] == "in_progress"
    assert attach(client, store, file_id) == attached  # the same ingest, not a second one
    copy = client.post(
        f"/v1/vector_stores/{store}/files",
        json={"file_id": openai_file(client, "copy.pdf", scan(documents))},
    )
    assert file_id in assert_error(copy, 409, code="conflict")["message"]
    content = client.get(f"/v1/vector_stores/{store}/files/{file_id}/content")
    assert assert_error(content, 409, code="conflict")["param"] == "file_id"
    gate.opened.set()
    assert settled(client, store, file_id)["status"] == "completed"
    assert listed(client, store) == [file_id]


def test_a_file_in_progress_is_cancelled_by_removing_it(
    client: TestClient, store: str, documents: Path, gate: OcrGate
) -> None:
    file_id = openai_file(client, "scan.pdf", scan(documents))
    assert attach(client, store, file_id)["status"] == "in_progress"
    assert ok(client.delete(f"/v1/vector_stores/{store}/files/{file_id}"))["deleted"] is True
    assert_error(client.get(f"/v1/vector_stores/{store}/files/{file_id}"), 404)
    assert counted(client, store) == ("completed", counts())
    gate.opened.set()
    assert ok(client.get(f"/v1/files/{file_id}"))["id"] == file_id  # the upload stays


def test_a_file_whose_ocr_fails_is_failed_with_the_reason_until_removed(
    client: TestClient, store: str, documents: Path, gate: OcrGate
) -> None:
    gate.failures.append("scan.pdf: page 1 could not be read")
    file_id = openai_file(client, "scan.pdf", scan(documents))
    attached = attach(client, store, file_id)
    gate.opened.set()
    failed = settled(client, store, file_id)
    assert failed == {
        **attached,
        "status": "failed",
        "last_error": {"code": "invalid_file", "message": "scan.pdf: page 1 could not be read"},
    }
    assert counted(client, store) == ("completed", counts(failed=1))
    assert (listed(client, store, "failed"), listed(client, store, "completed")) == (
        [file_id],
        [],
    )
    assert search(client, store, query=DOCLING)["data"] == []
    assert_error(client.get(f"/v1/vector_stores/{store}/files/{file_id}/content"), 409)

    assert ok(client.delete(f"/v1/vector_stores/{store}/files/{file_id}"))["deleted"] is True
    assert_error(client.get(f"/v1/vector_stores/{store}/files/{file_id}"), 404)
    assert counted(client, store) == ("completed", counts())


def test_a_file_the_server_fails_to_store_is_failed_with_a_server_error(
    client: TestClient, store: str, documents: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(draft: SourceDraft) -> Source:
        raise OSError("No space left on device")

    monkeypatch.setattr(client.app.state.library.store, "add_source", broken)  # type: ignore[attr-defined]
    file_id = openai_file(client, "scan.pdf", scan(documents))
    attach(client, store, file_id)
    # The file is not to blame, and nothing of the server's failure is shown.
    assert settled(client, store, file_id)["last_error"] == {
        "code": "server_error",
        "message": "the ingest failed",
    }


def test_deleting_an_uploaded_file_cancels_its_reading_and_takes_a_failed_one_with_it(
    client: TestClient, store: str, documents: Path, gate: OcrGate
) -> None:
    gate.failures.append("scan.pdf: page 1 could not be read")
    failing = openai_file(client, "scan.pdf", scan(documents))
    attach(client, store, failing)
    gate.opened.set()
    assert settled(client, store, failing)["status"] == "failed"
    assert ok(client.delete(f"/v1/files/{failing}"))["deleted"] is True
    assert_error(client.get(f"/v1/vector_stores/{store}/files/{failing}"), 404)
    assert counted(client, store) == ("completed", counts())
    gate.opened.clear()
    reading = openai_file(client, "again.pdf", scan(documents) + b"\n")
    assert attach(client, store, reading)["status"] == "in_progress"
    assert ok(client.delete(f"/v1/files/{reading}"))["deleted"] is True
    assert_error(client.get(f"/v1/files/{reading}"), 404)
    assert counted(client, store) == ("completed", counts())
    gate.opened.set()


def test_a_failed_file_attached_again_is_read_again(
    client: TestClient, store: str, documents: Path, gate: OcrGate
) -> None:
    gate.failures.append("scan.pdf: page 1 could not be read")
    file_id = openai_file(client, "scan.pdf", scan(documents))
    attach(client, store, file_id)
    gate.opened.set()
    assert settled(client, store, file_id)["status"] == "failed"
    attach(client, store, file_id)
    again = settled(client, store, file_id)
    assert (again["status"], again["last_error"]) == ("completed", None)
    assert counted(client, store) == ("completed", counts(completed=1))


def test_a_vector_store_is_in_progress_while_one_of_its_files_is(
    client: TestClient, documents: Path, gate: OcrGate
) -> None:
    scanned = openai_file(client, "scan.pdf", scan(documents))
    made = vector_store(client, file_ids=[scanned, openai_file(client, "refunds.md", REFUNDS)])
    assert (made["status"], made["file_counts"]) == (
        "in_progress",
        counts(in_progress=1, completed=1),
    )
    assert made["usage_bytes"] == len(REFUNDS)  # what is stored so far
    gate.opened.set()
    settled(client, made["id"], scanned)
    assert counted(client, made["id"]) == ("completed", counts(completed=2))


def test_a_scan_uploaded_to_the_bucket_is_a_file_under_the_id_its_source_gets(
    client: TestClient, store: str, documents: Path, gate: OcrGate
) -> None:
    uploaded = upload(client, store, "scan.pdf", scan(documents))
    assert uploaded.status_code == 202
    source_id = uploaded.json()["source"]["id"]
    in_progress = ok(client.get(f"/v1/vector_stores/{store}/files/{source_id}"))
    assert (in_progress["id"], in_progress["source_id"], in_progress["status"]) == (
        source_id,
        source_id,
        "in_progress",
    )
    gate.opened.set()
    done = settled(client, store, source_id)
    assert (done["id"], done["source_id"], done["status"]) == (source_id, source_id, "completed")


def test_a_scan_in_progress_is_hidden_from_callers_who_cannot_see_it(
    client: TestClient, store: str, documents: Path, gate: OcrGate
) -> None:
    uploaded = upload(client, store, "scan.pdf", scan(documents), acl='["hr"]')
    source_id = uploaded.json()["source"]["id"]
    assert listed(client, store, "in_progress") == [source_id]
    outsider = Principal(acl_labels=frozenset({"sales"}))
    client.app.dependency_overrides[get_principal] = lambda: outsider  # type: ignore[attr-defined]
    assert listed(client, store) == []
    assert counted(client, store) == ("completed", counts())
    assert_error(client.get(f"/v1/vector_stores/{store}/files/{source_id}"), 404)


def test_a_file_whose_bytes_another_file_stored_meanwhile_fails(
    settings: Settings, documents: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another way in (here the library itself, as the CLI would) may store the same bytes
    while OCR reads the file: the bucket keeps one source per content, so the file fails."""
    first_read, release = threading.Event(), threading.Event()
    read_page = Recogniser._read_page

    def first_page_waits(self: Recogniser, page: PageImage) -> PageText:
        if not first_read.is_set():
            first_read.set()
            assert release.wait(timeout=60), "the test never released the first page"
        return read_page(self, page)

    monkeypatch.setattr(Recogniser, "_read_page", first_page_waits)
    two_workers = settings.model_copy(update={"ocr": OcrSettings(workers=2)})
    data = scan(documents)
    with (
        Library.open(two_workers) as library,
        TestClient(create_app(two_workers, library=library)) as client,
    ):
        store = vector_store(client)["id"]
        file_id = openai_file(client, "scan.pdf", data)
        assert attach(client, store, file_id)["status"] == "in_progress"
        assert first_read.wait(timeout=60)
        library.ingest(data, filename="copy.pdf", bucket=store, metadata={"file_id": "file_cli"})
        release.set()
        failed = settled(client, store, file_id)
        assert (failed["status"], failed["last_error"]) == (
            "failed",
            {
                "code": "invalid_file",
                "message": f"Vector store '{store}' already holds the same bytes as 'file_cli'.",
            },
        )
        assert (listed(client, store, "completed"), listed(client, store, "failed")) == (
            ["file_cli"],
            [file_id],
        )
