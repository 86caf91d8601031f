"""The Files API in Anthropic's shapes, and files named in document blocks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import assert_error
from tests.api.test_messages import GRASS, NEW, ask, assert_anthropic_error, cited, message


def upload(client: TestClient, name: str, data: bytes, kind: str | None = None) -> dict[str, Any]:
    file = (name, data) if kind is None else (name, data, kind)
    response = client.post("/v1/files", files={"file": file}, headers=NEW)
    assert response.status_code == 200, response.text
    assert response.headers["request-id"].startswith("req_")
    body: dict[str, Any] = response.json()
    return body


def test_an_uploaded_file_is_described_listed_and_deleted(client: TestClient) -> None:
    made = upload(client, "notes.txt", GRASS.encode())
    assert set(made) == {
        "id",
        "type",
        "filename",
        "mime_type",
        "size_bytes",
        "created_at",
        "downloadable",
    }
    assert made["id"].startswith("file_") and len(made["id"]) == 29
    assert (made["type"], made["filename"], made["mime_type"]) == (
        "file",
        "notes.txt",
        "text/plain",
    )
    assert (made["size_bytes"], made["downloadable"]) == (len(GRASS.encode()), False)
    assert client.get(f"/v1/files/{made['id']}", headers=NEW).json() == made
    listed = client.get("/v1/files", headers=NEW).json()
    assert listed == {
        "data": [made],
        "has_more": False,
        "first_id": made["id"],
        "last_id": made["id"],
        "next_page": None,
    }
    deleted = client.delete(f"/v1/files/{made['id']}", headers=NEW)
    assert deleted.json() == {"id": made["id"], "type": "file_deleted"}
    response = client.get(f"/v1/files/{made['id']}", headers=NEW)
    assert_anthropic_error(response, 404, "not_found_error")


def test_errors_without_anthropic_version_keep_openais_shape(client: TestClient) -> None:
    assert_error(client.get("/v1/files/file_000000000000000000000000"), 404)


def test_a_text_file_is_cited_by_characters_with_its_file_id(client: TestClient) -> None:
    file_id = upload(client, "notes.txt", GRASS.encode())["id"]
    document = {
        "type": "document",
        "source": {"type": "file", "file_id": file_id},
        "citations": {"enabled": True},
    }
    body = message(ask(client, document, question="What color is the sky?"))
    (citation,) = cited(body)
    assert citation["type"] == "char_location" and citation["file_id"] == file_id
    assert GRASS[citation["start_char_index"] : citation["end_char_index"]] == "The sky is blue."


def test_a_pdf_file_is_cited_by_page(client: TestClient, documents: Path) -> None:
    data = (documents / "pdf_text" / "multi_page.pdf").read_bytes()
    made = upload(client, "multi_page.pdf", data, "application/octet-stream")
    assert made["mime_type"] == "application/pdf"
    document = {
        "type": "document",
        "source": {"type": "file", "file_id": made["id"]},
        "title": "History",
        "citations": {"enabled": True},
    }
    body = message(ask(client, document, question="What did LaTeX gain among academics?"))
    first = cited(body)[0]
    assert (first["type"], first["file_id"], first["document_title"]) == (
        "page_location",
        made["id"],
        "History",
    )
    assert (first["start_page_number"], first["end_page_number"]) == (3, 4)


def test_an_unknown_file_id_in_a_document_is_not_found(client: TestClient) -> None:
    document = {"type": "document", "source": {"type": "file", "file_id": "file_nope"}}
    response = ask(client, document, question="?")
    assert_anthropic_error(response, 404, "not_found_error")


def test_the_sdk_files_api_round_trips(client: TestClient) -> None:
    sdk = anthropic.Anthropic(api_key="k", base_url=str(client.base_url), http_client=client)
    made = sdk.files.upload(file=("a.txt", GRASS.encode(), "text/plain"))
    assert (made.type, made.filename, made.size_bytes) == ("file", "a.txt", len(GRASS))
    assert sdk.files.retrieve_metadata(made.id) == made
    assert [f.id for f in sdk.files.list()] == [made.id]
    assert [f.id for f in sdk.beta.files.list()] == [made.id]
    assert sdk.files.delete(made.id).id == made.id
    with pytest.raises(anthropic.NotFoundError):
        sdk.files.retrieve_metadata(made.id)


def openai_upload(client: TestClient, name: str, data: bytes, purpose: str) -> dict[str, Any]:
    response = client.post("/v1/files", files={"file": (name, data)}, data={"purpose": purpose})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_without_anthropic_version_a_file_is_openais_file_object(client: TestClient) -> None:
    made = openai_upload(client, "notes.txt", GRASS.encode(), "assistants")
    assert made == {
        "id": made["id"],
        "object": "file",
        "bytes": len(GRASS.encode()),
        "created_at": made["created_at"],
        "filename": "notes.txt",
        "purpose": "assistants",
        "status": "processed",
        "expires_at": None,
        "status_details": None,
    }
    assert made["id"].startswith("file_") and isinstance(made["created_at"], int)
    assert client.get(f"/v1/files/{made['id']}").json() == made
    assert client.get("/v1/files").json() == {
        "object": "list",
        "data": [made],
        "first_id": made["id"],
        "last_id": made["id"],
        "has_more": False,
    }
    content = client.get(f"/v1/files/{made['id']}/content")
    assert (content.status_code, content.content) == (200, GRASS.encode())
    assert content.headers["content-type"].startswith("text/plain")
    assert content.headers["content-disposition"] == "attachment"
    deleted = client.delete(f"/v1/files/{made['id']}")
    assert deleted.json() == {"id": made["id"], "object": "file", "deleted": True}
    assert_error(client.get(f"/v1/files/{made['id']}"), 404, code="not_found")
    assert_error(client.get(f"/v1/files/{made['id']}/content"), 404, code="not_found")


def test_one_file_store_serves_both_dialects(client: TestClient) -> None:
    anthropics = upload(client, "a.txt", GRASS.encode())
    openais = openai_upload(client, "b.txt", GRASS.encode(), "user_data")
    listed = client.get("/v1/files").json()["data"]
    assert {(f["id"], f["purpose"]) for f in listed} == {
        (anthropics["id"], "user_data"),
        (openais["id"], "user_data"),
    }
    described = client.get(f"/v1/files/{openais['id']}", headers=NEW).json()
    assert (described["type"], described["filename"], described["mime_type"]) == (
        "file",
        "b.txt",
        "text/plain",
    )
    assert len(client.get("/v1/files", headers=NEW).json()["data"]) == 2


def test_files_are_listed_by_purpose(client: TestClient) -> None:
    searched = openai_upload(client, "a.txt", b"alpha", "assistants")
    openai_upload(client, "b.txt", b"beta", "user_data")
    listed = client.get("/v1/files", params={"purpose": "assistants"}).json()
    assert [f["id"] for f in listed["data"]] == [searched["id"]]


def test_anthropic_uploads_are_not_downloadable(client: TestClient) -> None:
    made = upload(client, "a.txt", GRASS.encode())
    response = client.get(f"/v1/files/{made['id']}/content", headers=NEW)
    assert_anthropic_error(response, 400, "invalid_request_error")


@pytest.mark.parametrize(
    ("form", "files", "param", "code"),
    [
        ({}, {"file": ("a.txt", b"alpha")}, "purpose", "invalid_value"),
        ({"purpose": "fine-tune"}, {"file": ("a.txt", b"alpha")}, "purpose", "invalid_value"),
        ({"purpose": "assistants"}, None, "file", "missing_required_parameter"),
    ],
)
def test_a_bad_openai_upload_is_refused_in_openais_shape(
    client: TestClient,
    form: dict[str, str],
    files: dict[str, tuple[str, bytes]] | None,
    param: str,
    code: str,
) -> None:
    response = client.post("/v1/files", data=form, files=files)
    error = assert_error(response, 400, code=code)
    assert error["param"] == param
    assert client.get("/v1/files").json()["data"] == []


def test_the_openai_sdk_files_api_round_trips(client: TestClient) -> None:
    sdk = openai.OpenAI(api_key="k", base_url=f"{client.base_url}/v1", http_client=client)
    made = sdk.files.create(file=("a.txt", GRASS.encode()), purpose="assistants")
    assert (made.object, made.filename, made.bytes, made.purpose) == (
        "file",
        "a.txt",
        len(GRASS),
        "assistants",
    )
    assert sdk.files.retrieve(made.id) == made
    assert [f.id for f in sdk.files.list()] == [made.id]
    assert sdk.files.content(made.id).read() == GRASS.encode()
    deleted = sdk.files.delete(made.id)
    assert (deleted.id, deleted.deleted) == (made.id, True)
    with pytest.raises(openai.NotFoundError):
        sdk.files.retrieve(made.id)
