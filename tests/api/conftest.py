"""An in-process client of a fresh citewell app, and helpers to fill it."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pypdfium2
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from citewell.api import create_app
from citewell.config import Settings


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as client:
        yield client


ADMIN = "operator-secret"
"""The operator's key (``CITEWELL_ADMIN_KEY``) of the ``keyed`` server."""


@pytest.fixture
def keyed(settings: Settings) -> Iterator[TestClient]:
    """A client of a server with an operator key: every request but a link's needs a key."""
    with TestClient(create_app(settings.model_copy(update={"admin_key": SecretStr(ADMIN)}))) as c:
        yield c


def auth(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def make_key(client: TestClient, token: str = ADMIN, **body: Any) -> dict[str, Any]:
    """A new key (``POST /v1/keys`` with ``body``), with its secret."""
    response = client.post("/v1/keys", json=body, headers=auth(token))
    assert response.status_code == 201, response.text
    key: dict[str, Any] = response.json()
    return key


@pytest.fixture
def bucket(client: TestClient) -> str:
    """The slug of an empty bucket."""
    assert client.post("/v1/buckets", json={"slug": "notes"}).status_code == 201
    return "notes"


class Response(Protocol):
    """What the tests read of a response (TestClient's and httpx's alike)."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Any: ...  # httpx.Headers, or its twin in TestClient's httpx2

    @property
    def text(self) -> str: ...

    def json(self) -> Any: ...


def two_scans(documents: Path) -> bytes:
    """A PDF of two scanned pages: the Docling notice, then the LinnSequencer leaflet."""
    merged = pypdfium2.PdfDocument.new()
    for name in ("docling_ocr_test.pdf", "ocrmypdf_linn.pdf"):
        merged.import_pages(pypdfium2.PdfDocument(documents / "pdf_scanned" / name))
    buffer = io.BytesIO()
    merged.save(buffer)
    return buffer.getvalue()


def until_settled(client: TestClient, source_id: str) -> dict[str, Any]:
    """GET the source until it is no longer processing (the test does not time it)."""
    for _ in range(600):
        source: dict[str, Any] = client.get(f"/v1/sources/{source_id}").json()
        if source["status"] != "processing":
            return source
        time.sleep(0.1)
    raise AssertionError(f"{source_id} still processing")


def upload(client: TestClient, bucket: str, filename: str, data: bytes, **form: str) -> Response:
    return client.post(f"/v1/buckets/{bucket}/sources", files={"file": (filename, data)}, data=form)


def search(client: TestClient, query: str, buckets: list[str], **options: Any) -> dict[str, Any]:
    response = client.post("/v1/search", json={"query": query, "buckets": buckets, **options})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def assert_error(response: Response, status: int, *, code: str | None = None) -> dict[str, Any]:
    """The response is an OpenAI-shaped error with this status (and code); returns its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    assert error["type"] == ("server_error" if status >= 500 else "invalid_request_error")
    assert error["param"] is None or isinstance(error["param"], str)
    if code is not None:
        assert error["code"] == code
    return error
