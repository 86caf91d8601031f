"""The official ``openai`` SDK's Files and Vector Stores helpers against a real citewell server.

Like ``test_openai_sdk.py``, this runs with the newest SDK and with openai 1.99.9
(``.venv-openai1``, ``--noconftest``), so it imports nothing from citewell: the server runs in a
subprocess (``sdk_harness.running_server``). The documents are real ones from the evaluation data:
a page of the FAA's *AMT General Handbook*, and scans read with OCR in the background.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.e2e.sdk_harness import evaldata, http, multi_page_pdf, running_server

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

HANDBOOK = evaldata() / "documents" / "pdf_text" / "amt_handbook_sample.pdf"
SCAN = evaldata() / "documents" / "pdf_scanned" / "docling_ocr_test.pdf"
POSTER = evaldata() / "documents" / "images" / "easyocr_english.png"
QUESTION = "What are the two general types of self-locking nuts?"
ANSWER = (
    "The two general types of self-locking nuts currently in use are the all-metal type and the"
    " fiber lock type."
)


def plain(value: Any) -> Any:
    """An SDK object (or a plain dict, as some SDK versions give) as plain JSON data."""
    return value if isinstance(value, dict) else value.to_dict()


def flat(text: str) -> str:
    """Text with its line breaks (the PDF's) and runs of spaces made single spaces."""
    return " ".join(text.split())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_server(tmp_path_factory.mktemp("vector-stores")) as url:
        yield url


@pytest.fixture(scope="module")
def client(server: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def filled(client: openai.OpenAI) -> dict[str, Any]:
    """A vector store holding the handbook page (with attributes) and the 5-page essay."""
    uploaded = client.files.create(file=HANDBOOK, purpose="assistants")
    store = client.vector_stores.create(name="AMT handbook")
    attached = client.vector_stores.files.create_and_poll(
        file_id=uploaded.id, vector_store_id=store.id, attributes={"chapter": "7"}
    )
    essay = client.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=multi_page_pdf()
    )
    return {"file": uploaded, "store": store, "attached": attached, "essay": essay}


def test_an_uploaded_file_is_an_openai_file_object(client: openai.OpenAI, filled: Any) -> None:
    uploaded = filled["file"]
    assert (uploaded.object, uploaded.filename, uploaded.purpose, uploaded.status) == (
        "file",
        "amt_handbook_sample.pdf",
        "assistants",
        "processed",
    )
    assert uploaded.bytes == HANDBOOK.stat().st_size
    assert client.files.retrieve(uploaded.id) == uploaded
    assert client.files.content(uploaded.id).read() == HANDBOOK.read_bytes()


def test_attached_files_are_completed_at_once_under_their_file_ids(
    client: openai.OpenAI, filled: Any
) -> None:
    store, attached, essay = filled["store"], filled["attached"], filled["essay"]
    assert (attached.id, attached.object, attached.status, attached.last_error) == (
        filled["file"].id,
        "vector_store.file",
        "completed",
        None,
    )
    assert (attached.vector_store_id, attached.attributes) == (store.id, {"chapter": "7"})
    assert (essay.status, plain(essay)["filename"]) == ("completed", "multi_page.pdf")
    assert client.files.retrieve(essay.id).filename == "multi_page.pdf"
    counted = client.vector_stores.retrieve(store.id)
    assert (counted.name, counted.status) == ("AMT handbook", "completed")
    assert plain(counted.file_counts) == {
        "in_progress": 0,
        "completed": 2,
        "failed": 0,
        "cancelled": 0,
        "total": 2,
    }
    assert counted.usage_bytes == HANDBOOK.stat().st_size + multi_page_pdf().stat().st_size


def test_listing_pages_end(client: openai.OpenAI, filled: Any) -> None:
    store = filled["store"]
    # One item a page asked for: the SDK stops only on has_more false, else it asks forever.
    ids = [f.id for f in client.vector_stores.files.list(vector_store_id=store.id, limit=1)]
    assert sorted(ids) == sorted([filled["file"].id, filled["essay"].id])
    assert store.id in [s.id for s in client.vector_stores.list(limit=1)]
    assert filled["file"].id in [f.id for f in client.files.list()]


def test_search_returns_the_passage_that_answers(client: openai.OpenAI, filled: Any) -> None:
    store = filled["store"]
    results = list(client.vector_stores.search(store.id, query=QUESTION, max_num_results=3))
    assert 1 <= len(results) <= 3
    top = results[0]
    assert (top.file_id, top.filename, top.attributes) == (
        filled["file"].id,
        "amt_handbook_sample.pdf",
        {"chapter": "7"},
    )
    assert [c.type for c in top.content] == ["text"]
    assert top.content[0].text.startswith("pulleys, provided the inner race of the bearing")
    assert ANSWER in flat(top.content[0].text)
    assert all(0 <= r.score <= 1 for r in results)
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)


def test_search_filters_on_attributes(client: openai.OpenAI, filled: Any) -> None:
    store = filled["store"]
    essay_only: Any = {"type": "ne", "key": "chapter", "value": "7"}
    results = list(client.vector_stores.search(store.id, query=QUESTION, filters=essay_only))
    assert {r.file_id for r in results} == {filled["essay"].id}


def test_file_search_answers_from_the_vector_store(client: openai.OpenAI, filled: Any) -> None:
    store = filled["store"]
    response = client.responses.create(
        model="citewell-agent",
        input=QUESTION,
        tools=[{"type": "file_search", "vector_store_ids": [store.id]}],
    )
    assert response.output_text == ANSWER
    [annotation] = plain(response)["output"][-1]["content"][0]["annotations"]
    # Citations name the source version, whose canonical text their offsets index.
    assert (annotation["type"], annotation["filename"], annotation["file_id"]) == (
        "file_citation",
        "amt_handbook_sample.pdf",
        plain(filled["attached"])["source_id"],
    )
    assert flat(annotation["cited_text"]) == ANSWER


def test_deleting_removes_the_file_then_the_store(client: openai.OpenAI) -> None:
    store = client.vector_stores.create(name="Short-lived")
    made = client.vector_stores.files.upload_and_poll(vector_store_id=store.id, file=HANDBOOK)
    removed = client.vector_stores.files.delete(file_id=made.id, vector_store_id=store.id)
    assert (removed.id, removed.deleted, removed.object) == (
        made.id,
        True,
        "vector_store.file.deleted",
    )
    assert client.vector_stores.retrieve(store.id).file_counts.total == 0
    deleted = client.vector_stores.delete(store.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (
        store.id,
        True,
        "vector_store.deleted",
    )
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.retrieve(store.id)
    gone = client.files.delete(made.id)
    assert (gone.id, gone.deleted, gone.object) == (made.id, True, "file")
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(made.id)


@pytest.fixture(scope="module")
def scanned(client: openai.OpenAI) -> dict[str, Any]:
    """A vector store holding a scanned PDF and a photographed poster, both read with OCR."""
    store = client.vector_stores.create(name="Scans")
    uploaded = client.files.create(file=SCAN, purpose="assistants")
    scan = client.vector_stores.files.create_and_poll(
        file_id=uploaded.id, vector_store_id=store.id, attributes={"kind": "scan"}
    )
    poster = client.vector_stores.files.upload_and_poll(vector_store_id=store.id, file=POSTER)
    return {"store": store, "file": uploaded, "scan": scan, "poster": poster}


def test_scans_are_completed_once_read_with_ocr(client: openai.OpenAI, scanned: Any) -> None:
    store, scan, poster = scanned["store"], scanned["scan"], scanned["poster"]
    assert (scan.id, scan.status, scan.last_error, scan.attributes) == (
        scanned["file"].id,
        "completed",
        None,
        {"kind": "scan"},
    )
    assert (poster.status, poster.last_error, plain(poster)["filename"]) == (
        "completed",
        None,
        "easyocr_english.png",
    )
    assert (scan.usage_bytes, poster.usage_bytes) == (SCAN.stat().st_size, POSTER.stat().st_size)
    counted = client.vector_stores.retrieve(store.id)
    assert counted.status == "completed"
    assert plain(counted.file_counts) == {
        "in_progress": 0,
        "completed": 2,
        "failed": 0,
        "cancelled": 0,
        "total": 2,
    }
    completed = client.vector_stores.files.list(vector_store_id=store.id, filter="completed")
    assert sorted(f.id for f in completed) == sorted([scan.id, poster.id])
    assert list(client.vector_stores.files.list(vector_store_id=store.id, filter="failed")) == []


@pytest.mark.parametrize(
    ("query", "key", "text"),
    [
        ("What does Docling bundle?", "scan", "Docling bundles PDF document conversion"),
        ("How to reduce the risk of coronavirus?", "poster", "Reduce your risk of coronavirus"),
    ],
)
def test_scans_are_searched_with_their_page(
    client: openai.OpenAI, scanned: Any, query: str, key: str, text: str
) -> None:
    top = plain(next(iter(client.vector_stores.search(scanned["store"].id, query=query))))
    assert (top["file_id"], top["page_number"]) == (scanned[key].id, 1)
    assert " ".join(top["content"][0]["text"].split()).startswith(text)


def openai_error(error: openai.APIStatusError) -> dict[str, Any]:
    """The error object of the body: OpenAI's four keys."""
    body = error.body
    assert isinstance(body, dict) and set(body) == {"message", "type", "param", "code"}
    assert body["type"] == "invalid_request_error"
    return body


def test_bad_input_is_refused_in_openais_shape_and_the_server_goes_on(
    client: openai.OpenAI, server: str, filled: Any
) -> None:
    with pytest.raises(openai.NotFoundError) as unknown_store:
        client.vector_stores.search("bkt_000000000000000000000000", query=QUESTION)
    assert openai_error(unknown_store.value)["param"] == "vector_store_id"
    with pytest.raises(openai.NotFoundError) as unknown_file:
        client.vector_stores.files.create_and_poll(
            file_id="file_000000000000000000000000", vector_store_id=filled["store"].id
        )
    assert openai_error(unknown_file.value)["param"] == "file_id"
    with pytest.raises(openai.BadRequestError) as wrong_purpose:
        client.files.create(file=HANDBOOK, purpose="fine-tune")
    assert openai_error(wrong_purpose.value)["param"] == "purpose"
    with pytest.raises(openai.BadRequestError) as too_many:
        client.vector_stores.search(filled["store"].id, query=QUESTION, max_num_results=51)
    assert openai_error(too_many.value)["param"] == "max_num_results"
    status, _, body = http(
        "POST",
        f"{server}/v1/files",
        b"purpose=assistants",
        {"content-type": "application/x-www-form-urlencoded"},
    )
    assert status == 400
    assert json.loads(body)["error"]["param"] == "file"
    assert client.vector_stores.retrieve(filled["store"].id).file_counts.completed == 2
