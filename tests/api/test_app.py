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
    ("POST", "/v1/buckets/{bucket}"): "rename_bucket",
    ("GET", "/v1/buckets/{bucket}/export"): "export_bucket",
    ("POST", "/v1/buckets/import"): "import_bucket",
    ("POST", "/v1/buckets/{bucket}/sources"): "upload_source",
    ("GET", "/v1/buckets/{bucket}/sources"): "list_sources",
    ("GET", "/v1/sources/{source_id}"): "get_source",
    ("DELETE", "/v1/sources/{source_id}"): "delete_source",
    ("GET", "/v1/sources/{source_id}/content"): "get_source_content",
    ("GET", "/v1/sources/{source_id}/text"): "get_source_text",
    ("GET", "/v1/links/{token}"): "open_link",
    ("POST", "/v1/search"): "search",
    ("POST", "/v1/responses"): "create_response",
    ("GET", "/v1/responses/{response_id}"): "get_response",
    ("POST", "/v1/chat/completions"): "create_chat_completion",
    ("POST", "/v1/messages"): "create_message",
    ("POST", "/v1/files"): "upload_file",
    ("GET", "/v1/files"): "list_files",
    ("GET", "/v1/files/{file_id}"): "get_file",
    ("DELETE", "/v1/files/{file_id}"): "delete_file",
    ("GET", "/v1/files/{file_id}/content"): "get_file_content",
    ("POST", "/v1/vector_stores"): "create_vector_store",
    ("GET", "/v1/vector_stores"): "list_vector_stores",
    ("GET", "/v1/vector_stores/{vector_store_id}"): "get_vector_store",
    ("POST", "/v1/vector_stores/{vector_store_id}"): "update_vector_store",
    ("DELETE", "/v1/vector_stores/{vector_store_id}"): "delete_vector_store",
    ("POST", "/v1/vector_stores/{vector_store_id}/files"): "create_vector_store_file",
    ("GET", "/v1/vector_stores/{vector_store_id}/files"): "list_vector_store_files",
    ("GET", "/v1/vector_stores/{vector_store_id}/files/{file_id}"): "get_vector_store_file",
    (
        "GET",
        "/v1/vector_stores/{vector_store_id}/files/{file_id}/content",
    ): "get_vector_store_file_content",
    (
        "DELETE",
        "/v1/vector_stores/{vector_store_id}/files/{file_id}",
    ): "delete_vector_store_file",
    ("POST", "/v1/vector_stores/{vector_store_id}/search"): "search_vector_store",
    ("GET", "/v1/models"): "list_models",
    ("GET", "/v1/models/{model}"): "get_model",
    ("GET", "/v1/agents"): "list_agents",
    ("POST", "/v1/agents"): "create_agent",
    ("GET", "/v1/agents/{name}"): "get_agent",
    ("POST", "/v1/agents/{name}"): "update_agent",
    ("DELETE", "/v1/agents/{name}"): "delete_agent",
    ("POST", "/v1/tenants"): "create_tenant",
    ("GET", "/v1/tenants"): "list_tenants",
    ("POST", "/v1/keys"): "create_key",
    ("GET", "/v1/keys"): "list_keys",
    ("GET", "/v1/keys/{key_id}"): "get_key",
    ("DELETE", "/v1/keys/{key_id}"): "revoke_key",
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
