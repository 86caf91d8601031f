"""Uploading files that need OCR: 202 at once, a visible status and progress, ready later."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from citewell.api import create_app
from citewell.config import OcrSettings, Settings
from citewell.errors import NotFound, ParseError
from citewell.ingest.ocr import PageImage, PageText, Recogniser
from citewell.library import Library
from citewell.model import IngestJob, Principal
from tests.api.conftest import assert_error, search, two_scans, until_settled, upload

PHRASE = "Reduce your risk of coronavirus infection"


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """OCR of every page waits until the test opens this gate."""
    opened = threading.Event()
    read_page = Recogniser._read_page

    def gated(self: Recogniser, page: PageImage) -> PageText:
        assert opened.wait(timeout=60), "the test never opened the gate"
        return read_page(self, page)

    monkeypatch.setattr(Recogniser, "_read_page", gated)
    return opened


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as client:
        assert client.post("/v1/buckets", json={"slug": "scans"}).status_code == 201
        yield client


def _poster(documents: Path) -> bytes:
    return (documents / "images" / "easyocr_english.png").read_bytes()


def test_a_scan_is_accepted_processing_then_ready_and_found(
    client: TestClient, documents: Path, gate: threading.Event
) -> None:
    response = upload(client, "scans", "poster.png", _poster(documents))
    assert response.status_code == 202
    body = response.json()
    assert body["outcome"] == "processing"
    source = body["source"]
    assert (source["status"], source["progress"]) == (
        "processing",
        {"pages_done": 0, "pages_total": 1},
    )
    assert (source["filename"], source["mime_type"], source["version"]) == (
        "poster.png",
        "image/png",
        None,
    )
    # While the page waits for OCR, the server answers other requests, and the source is
    # visible by its id only: not listed, not searched.
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get(f"/v1/sources/{source['id']}").json()["status"] == "processing"
    assert client.get("/v1/buckets/scans/sources").json()["data"] == []
    assert search(client, PHRASE, ["scans"])["data"] == []

    gate.set()
    ready = until_settled(client, source["id"])
    assert (ready["status"], ready["progress"], ready["modality"]) == ("ready", None, "image")
    assert (ready["version"], ready["page_count"]) == (1, 1)
    hits = search(client, PHRASE, ["scans"])["data"]
    assert hits and hits[0]["source"]["id"] == source["id"]
    pages = client.get(f"/v1/sources/{source['id']}/text").json()["pages"]
    assert [(p["width"], p["height"], p["modality"]) for p in pages] == [(905, 480, "image")]
    assert 0 < pages[0]["ocr_confidence"] <= 100


def test_the_same_scan_sent_twice_meanwhile_is_one_source(
    client: TestClient, documents: Path, gate: threading.Event
) -> None:
    first = upload(client, "scans", "poster.png", _poster(documents)).json()["source"]
    again = upload(client, "scans", "poster-again.png", _poster(documents))
    assert (again.status_code, again.json()["source"]["id"]) == (202, first["id"])
    gate.set()
    assert until_settled(client, first["id"])["status"] == "ready"


def test_a_scan_that_fails_during_ocr_shows_failed_with_the_reason(
    client: TestClient, documents: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = threading.Event()

    def failing(self: Recogniser, page: PageImage) -> PageText:
        started.wait(timeout=60)
        raise ParseError("poster.png: page 1 could not be read")

    monkeypatch.setattr(Recogniser, "_read_page", failing)
    response = upload(client, "scans", "poster.png", _poster(documents))
    assert response.status_code == 202
    started.set()
    failed = until_settled(client, response.json()["source"]["id"])
    assert (failed["status"], failed["error"]) == (
        "failed",
        "poster.png: page 1 could not be read",
    )
    assert client.get("/v1/buckets/scans/sources").json()["data"] == []


def test_a_text_file_is_still_stored_at_once(client: TestClient) -> None:
    response = upload(client, "scans", "notes.txt", b"Plain text needs no OCR.")
    assert (response.status_code, response.json()["source"]["status"]) == (201, "ready")


@pytest.mark.parametrize(
    ("data", "status", "code"),
    [
        (b"\x89PNG\r\n\x1a\n" + b"\0" * 64, 422, "invalid_file"),
        (None, 413, "file_too_large"),
    ],
)
def test_damaged_and_huge_images_are_refused_and_the_server_serves_on(
    tmp_path: Path, documents: Path, data: bytes | None, status: int, code: str
) -> None:
    settings = Settings(data_dir=tmp_path / "data", ocr=OcrSettings(max_image_pixels=10_000))
    with TestClient(create_app(settings)) as client:
        assert client.post("/v1/buckets", json={"slug": "scans"}).status_code == 201
        sent = data if data is not None else _poster(documents)  # 905 x 480 pixels
        assert_error(upload(client, "scans", "scan.png", sent), status, code=code)
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/v1/buckets/scans/sources").json()["data"] == []


def test_a_processing_source_is_hidden_from_callers_who_cannot_see_it(
    settings: Settings, documents: Path, gate: threading.Event
) -> None:
    library = Library.open(settings)
    try:
        library.create_bucket("scans")
        job = library.submit(
            _poster(documents), filename="poster.png", bucket="scans", acl=frozenset({"hr"})
        )
        assert isinstance(job, IngestJob)
        assert library.ingest_job(job.source_id).pages_total == 1
        outsider = Principal(acl_labels=frozenset({"sales"}))
        with pytest.raises(NotFound):
            library.ingest_job(job.source_id, principal=outsider)
        other_tenant = Principal(tenant_id=library.store.create_tenant("other").id)
        with pytest.raises(NotFound):
            library.ingest_job(job.source_id, principal=other_tenant)
    finally:
        gate.set()
        library.close()


def test_a_citation_into_a_scan_lands_on_its_page_and_covers_its_ocr_words(
    client: TestClient, documents: Path
) -> None:
    source_id = upload(client, "scans", "scans.pdf", two_scans(documents)).json()["source"]["id"]
    assert until_settled(client, source_id)["status"] == "ready"
    response = client.post(
        "/v1/responses",
        json={
            "input": "How many polyphonic tracks does each of the 100 sequences contain?",
            "tools": [{"type": "file_search", "vector_store_ids": ["scans"]}],
        },
    )
    assert response.status_code == 200, response.text
    annotations = response.json()["output"][-1]["content"][0]["annotations"]
    citation = next(a for a in annotations if "32 simultaneous, polyphonic" in a["cited_text"])
    assert (citation["page_number"], [r["page_number"] for r in citation["regions"]]) == (2, [2])
    [region] = citation["regions"]

    # Every OCR word of the cited range lies inside one of the region's boxes, and the region
    # reports the least confidence among those words.
    start, end = citation["cited_start_index"], citation["cited_end_index"]
    store = client.app.state.library.store  # type: ignore[attr-defined]
    page = store.source_pages(source_id)[1]
    rows = slice(start - page.span.start, end - page.span.start)
    char_boxes = store.char_boxes(source_id, 2)[rows]
    confidences = store.char_confidences(source_id, 2)[rows]
    read = ~np.isnan(char_boxes[:, 0])
    assert read.sum() == sum(not c.isspace() for c in citation["cited_text"])
    boxes = [(b["x0"], b["y0"], b["x1"], b["y1"]) for b in region["boxes"]]
    for x0, y0, x1, y1 in char_boxes[read]:
        assert any(
            bx0 <= x0 and by0 <= y0 and x1 <= bx1 and y1 <= by1 for bx0, by0, bx1, by1 in boxes
        )
    assert region["ocr_confidence"] == int(confidences[read].min())
    assert 0 < region["ocr_confidence"] <= 100
