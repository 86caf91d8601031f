"""The app factory: lifespan, health, operation ids."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from citewell.api import create_app
from citewell.api.app import serve_app
from citewell.config import Settings
from citewell.library import Library
from tests.api.conftest import assert_error

OPERATIONS = {
    ("GET", "/healthz"): "health",
    ("POST", "/v1/buckets"): "create_bucket",
    ("GET", "/v1/buckets"): "list_buckets",
    ("GET", "/v1/buckets/{bucket}"): "get_bucket",
    ("DELETE", "/v1/buckets/{bucket}"): "delete_bucket",
    ("POST", "/v1/buckets/{bucket}/sources"): "upload_source",
    ("GET", "/v1/buckets/{bucket}/sources"): "list_sources",
    ("GET", "/v1/sources/{source_id}"): "get_source",
    ("DELETE", "/v1/sources/{source_id}"): "delete_source",
    ("GET", "/v1/sources/{source_id}/content"): "get_source_content",
    ("GET", "/v1/sources/{source_id}/text"): "get_source_text",
    ("POST", "/v1/search"): "search",
    ("POST", "/v1/responses"): "create_response",
    ("GET", "/v1/responses/{response_id}"): "get_response",
    ("POST", "/v1/chat/completions"): "create_chat_completion",
    ("POST", "/v1/messages"): "create_message",
    ("POST", "/v1/files"): "upload_file",
    ("GET", "/v1/files"): "list_files",
    ("GET", "/v1/files/{file_id}"): "get_file",
    ("DELETE", "/v1/files/{file_id}"): "delete_file",
    ("GET", "/v1/models"): "list_models",
    ("GET", "/v1/models/{model}"): "get_model",
}


def test_health_is_ok_once_the_library_is_open(client: TestClient) -> None:
    response = client.get("/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_health_is_503_while_the_library_is_not_open(settings: Settings) -> None:
    client = TestClient(create_app(settings))  # not entered: the lifespan has not run
    assert_error(client.get("/healthz"), 503, code="store_unavailable")


def test_operation_ids_are_the_handler_names(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    found = {
        (method.upper(), path): operation["operationId"]
        for path, methods in spec["paths"].items()
        for method, operation in methods.items()
    }
    assert found == OPERATIONS


def test_the_upload_form_is_described_in_the_spec(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    body = spec["paths"]["/v1/buckets/{bucket}/sources"]["post"]["requestBody"]
    schema_ref = body["content"]["multipart/form-data"]["schema"]["$ref"].split("/")[-1]
    fields = spec["components"]["schemas"][schema_ref]["properties"]
    assert set(fields) == {"file", "effective_date", "acl", "metadata"}


def test_a_library_given_to_the_app_is_left_open(settings: Settings) -> None:
    with Library.open(settings) as library:
        with TestClient(create_app(settings, library)) as client:
            client.post("/v1/buckets", json={"slug": "notes"})
        assert [b.slug for b in library.list_buckets()] == ["notes"]


def test_the_uvicorn_factory_reads_settings_from_the_environment(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CITEWELL_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("CITEWELL_RETRIEVE__EMBEDDER", "use")
    with TestClient(serve_app()) as client:
        client.post("/v1/buckets", json={"slug": "notes"})
    assert (settings.data_dir / "citewell.db").exists()
