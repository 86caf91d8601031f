"""A cheap request buys no minutes of OCR: blank pages are told apart without it, OCR has a
budget per file and per tenant, and a source being read can be cancelled and deleted."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pypdfium2
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from citewell.api import create_app
from citewell.config import IngestSettings, OcrSettings, Settings
from citewell.ingest.ocr import PageImage, PageText, Recogniser, is_blank
from tests.api.conftest import assert_error, search, two_scans, until_settled, upload


@dataclass
class Tesseract:
    """Counts the pages given to tesseract; each waits until the test opens ``gate``."""

    gate: threading.Event = field(default_factory=threading.Event)
    pages: int = 0


@pytest.fixture
def tesseract(monkeypatch: pytest.MonkeyPatch) -> Iterator[Tesseract]:
    seen = Tesseract()
    read_page = Recogniser._read_page

    def counted(self: Recogniser, page: PageImage) -> PageText:
        seen.pages += 1
        assert seen.gate.wait(timeout=60), "the test never opened the gate"
        return read_page(self, page)

    monkeypatch.setattr(Recogniser, "_read_page", counted)
    yield seen
    seen.gate.set()


def blank_pdf(pages: int) -> bytes:
    document = pypdfium2.PdfDocument.new()
    for _ in range(pages):
        document.new_page(612, 792)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def serve(settings: Settings, **ingest: int) -> TestClient:
    limits = settings.ingest.model_copy(update=ingest)
    return TestClient(
        create_app(settings.model_copy(update={"ingest": limits, "ocr": OcrSettings(workers=1)}))
    )


def test_a_pdf_of_two_thousand_blank_pages_is_stored_without_ocr(
    settings: Settings, tesseract: Tesseract
) -> None:
    with serve(settings) as client:
        client.post("/v1/buckets", json={"slug": "scans"})
        stored = upload(client, "scans", "blank.pdf", blank_pdf(2000))
        assert stored.status_code == 201, stored.text  # not 202: nothing to read with OCR
        source = stored.json()["source"]
        assert (source["status"], source["page_count"], source["char_count"]) == ("ready", 2000, 0)
        assert client.delete(f"/v1/sources/{source['id']}").status_code == 200
    assert tesseract.pages == 0


def test_blank_means_no_ink_at_all(documents: Path) -> None:
    assert is_blank(Image.new("L", (850, 1100), 255))
    assert is_blank(Image.new("RGBA", (850, 1100), (0, 0, 0, 0)))  # transparent: white
    assert not is_blank(Image.open(documents / "images" / "easyocr_english.png"))
    speck = Image.new("L", (850, 1100), 255)
    speck.putpixel((400, 500), 120)
    assert not is_blank(speck)  # a speck of ink is read: the budget bounds what that costs


def test_a_file_with_more_pages_to_read_than_the_budget_is_refused_before_ocr(
    settings: Settings, documents: Path, tesseract: Tesseract
) -> None:
    with serve(settings, max_ocr_pages=1) as client:
        client.post("/v1/buckets", json={"slug": "scans"})
        refused = upload(client, "scans", "two.pdf", two_scans(documents))
        error = assert_error(refused, 413, code="file_too_large")
        assert "2 pages to read with OCR; the limit is 1" in error["message"]
        assert "CITEWELL_INGEST__MAX_OCR_PAGES" in error["message"]
        assert client.get("/v1/buckets/scans/sources").json()["data"] == []
    assert tesseract.pages == 0


def test_a_tenant_over_its_ocr_budget_is_told_to_retry_later(
    settings: Settings, documents: Path, tesseract: Tesseract
) -> None:
    poster = (documents / "images" / "easyocr_english.png").read_bytes()
    with serve(settings, max_tenant_ocr_pages=2) as client:
        client.post("/v1/buckets", json={"slug": "scans"})
        first = upload(client, "scans", "two.pdf", two_scans(documents))
        assert first.status_code == 202, first.text
        refused = upload(client, "scans", "poster.png", poster)
        error = assert_error(refused, 429, code="quota_exceeded")
        assert "CITEWELL_INGEST__MAX_TENANT_OCR_PAGES" in error["message"]
        tesseract.gate.set()
        ready = until_settled(client, first.json()["source"]["id"])
        assert ready["status"] == "ready"
        assert upload(client, "scans", "poster.png", poster).status_code == 202


def test_a_source_being_read_is_cancelled_and_deleted_and_stores_nothing(
    settings: Settings, documents: Path, tesseract: Tesseract
) -> None:
    with serve(settings) as client:
        client.post("/v1/buckets", json={"slug": "scans"})
        sent = upload(client, "scans", "two.pdf", two_scans(documents))
        assert sent.status_code == 202
        source_id = sent.json()["source"]["id"]
        deleted = client.delete(f"/v1/sources/{source_id}")
        assert deleted.json() == {"id": source_id, "object": "source.deleted", "deleted": True}
        assert_error(client.get(f"/v1/sources/{source_id}"), 404, code="not_found")
        tesseract.gate.set()  # the page begun is finished; the next is never begun
    # Closed: the background ingest has ended. Opened again, nothing of it is there.
    with serve(settings) as client:
        assert client.get("/v1/buckets/scans/sources").json()["data"] == []
        assert search(client, "coronavirus infection", ["scans"])["data"] == []
        assert_error(client.get(f"/v1/sources/{source_id}"), 404)
    assert tesseract.pages == 1


def test_the_budgets_are_settings_with_safe_defaults() -> None:
    limits = IngestSettings()
    assert (limits.max_ocr_pages, limits.max_tenant_ocr_pages) == (1000, 2000)
