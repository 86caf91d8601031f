"""Sources over HTTP: upload, versions, read back, delete — and bad files that change nothing."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from citewell.api import create_app
from citewell.config import IngestSettings, Settings
from tests.api.conftest import assert_error, search, upload

REFUNDS = b"Refunds are paid within thirty days. Shipping is free above fifty euros."
HANDBOOK = b"""# Staff handbook

## Refunds

A refund is paid within thirty days of the request.

## Holidays

Every employee has twenty-five days of paid leave a year.
"""


def test_uploading_a_text_file_creates_version_1(client: TestClient, bucket: str) -> None:
    response = upload(client, bucket, "policy.txt", REFUNDS)
    assert response.status_code == 201
    body = response.json()
    assert body["outcome"] == "created"
    assert body["superseded"] is None
    source = body["source"]
    assert source["object"] == "source"
    assert source["id"].startswith("src_")
    assert source["bucket_id"] == client.get(f"/v1/buckets/{bucket}").json()["id"]
    assert source["filename"] == "policy.txt"
    assert source["mime_type"] == "text/plain"
    assert source["content_hash"] == hashlib.sha256(REFUNDS).hexdigest()
    assert source["byte_size"] == len(REFUNDS)
    assert source["char_count"] == len(REFUNDS.decode())
    assert source["chunk_count"] == 1
    assert (source["version"], source["supersedes"], source["superseded_by"]) == (1, None, None)
    assert source["status"] == "ready"
    assert source["language"] == "en"
    assert source["page_count"] is None
    assert (source["acl"], source["metadata"], source["effective_date"]) == ([], {}, None)


def test_uploading_markdown_keeps_its_media_type(client: TestClient, bucket: str) -> None:
    source = upload(client, bucket, "handbook.md", HANDBOOK).json()["source"]
    assert source["mime_type"] == "text/markdown"
    assert source["title"] == "Staff handbook"


def test_uploading_a_pdf_records_its_pages(
    client: TestClient, bucket: str, documents: Path
) -> None:
    data = (documents / "pdf_text" / "multi_page.pdf").read_bytes()
    source = upload(client, bucket, "multi_page.pdf", data).json()["source"]
    assert source["mime_type"] == "application/pdf"
    assert source["page_count"] == 5
    assert source["modality"] == "text"
    text = client.get(f"/v1/sources/{source['id']}/text").json()
    assert [page["number"] for page in text["pages"]] == [1, 2, 3, 4, 5]
    assert text["pages"][0]["span"]["start"] == 0
    assert text["pages"][-1]["span"]["end"] == len(text["text"]) == source["char_count"]
    for before, after in zip(text["pages"], text["pages"][1:], strict=False):
        assert before["span"]["end"] <= after["span"]["start"]
    page_2 = text["pages"][1]["span"]
    assert "Apple’s MacWrite" in text["text"][page_2["start"] : page_2["end"]]


def test_effective_date_acl_and_metadata_are_stored(client: TestClient, bucket: str) -> None:
    source = upload(
        client,
        bucket,
        "policy.txt",
        REFUNDS,
        effective_date="2024-03-01",
        acl='["hr", "legal"]',
        metadata='{"team": "hr", "year": 2024, "draft": false}',
    ).json()["source"]
    assert source["effective_date"] == "2024-03-01"
    assert source["acl"] == ["hr", "legal"]
    assert source["metadata"] == {"team": "hr", "year": 2024, "draft": False}
    assert client.get(f"/v1/sources/{source['id']}").json() == source


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("effective_date", "March 1st"),
        ("acl", "hr"),
        ("acl", "[1, 2]"),
        ("metadata", "team=hr"),
        ("metadata", '["hr"]'),
        ("metadata", '{"team": {"name": "hr"}}'),
    ],
)
def test_an_invalid_form_field_is_refused_naming_it(
    client: TestClient, bucket: str, field: str, value: str
) -> None:
    response = upload(client, bucket, "policy.txt", REFUNDS, **{field: value})
    assert assert_error(response, 400)["param"] == field
    assert client.get(f"/v1/buckets/{bucket}/sources").json()["data"] == []


def test_an_upload_without_a_file_is_refused_naming_the_file(
    client: TestClient, bucket: str
) -> None:
    response = client.post(f"/v1/buckets/{bucket}/sources", data={"acl": '["hr"]'})
    assert assert_error(response, 400, code="missing_required_parameter")["param"] == "file"


def test_an_upload_into_an_unknown_bucket_is_404(client: TestClient) -> None:
    assert_error(upload(client, "nope", "policy.txt", REFUNDS), 404, code="not_found")


def test_the_same_bytes_twice_are_unchanged_with_200(client: TestClient, bucket: str) -> None:
    first = upload(client, bucket, "policy.txt", REFUNDS).json()["source"]
    again = upload(client, bucket, "copy-of-policy.txt", REFUNDS)
    assert again.status_code == 200
    assert again.json() == {"outcome": "unchanged", "source": first, "superseded": None}
    assert len(client.get(f"/v1/buckets/{bucket}/sources").json()["data"]) == 1


def test_other_bytes_under_the_same_name_are_a_new_version(client: TestClient, bucket: str) -> None:
    old = upload(client, bucket, "policy.txt", REFUNDS).json()["source"]
    response = upload(client, bucket, "policy.txt", b"Refunds are paid within ninety days.")
    assert response.status_code == 201
    body = response.json()
    assert body["outcome"] == "new_version"
    new = body["source"]
    assert (new["version"], new["supersedes"], new["superseded_by"]) == (2, old["id"], None)
    assert body["superseded"]["id"] == old["id"]
    assert body["superseded"]["superseded_by"] == new["id"]
    # Both versions stay addressable; the list shows the current one unless asked for all.
    assert client.get(f"/v1/sources/{old['id']}").json()["superseded_by"] == new["id"]
    assert client.get(f"/v1/sources/{new['id']}").json() == new
    current = client.get(f"/v1/buckets/{bucket}/sources").json()["data"]
    assert [s["id"] for s in current] == [new["id"]]
    every = client.get(f"/v1/buckets/{bucket}/sources?include_superseded=true").json()["data"]
    assert sorted(s["id"] for s in every) == sorted([old["id"], new["id"]])


def test_sources_are_listed_in_the_openai_list_shape(client: TestClient, bucket: str) -> None:
    ids = [
        upload(client, bucket, f"{n}.txt", f"Note {n}.".encode()).json()["source"]["id"]
        for n in ("one", "two")
    ]
    listing = client.get(f"/v1/buckets/{bucket}/sources").json()
    assert listing["object"] == "list"
    assert sorted(s["id"] for s in listing["data"]) == sorted(ids)
    assert listing["first_id"] == listing["data"][0]["id"]
    assert listing["last_id"] == listing["data"][-1]["id"]
    assert listing["has_more"] is False


def test_the_original_is_returned_byte_for_byte_as_a_download(
    client: TestClient, bucket: str
) -> None:
    source = upload(client, bucket, "handbook.md", HANDBOOK).json()["source"]
    response = client.get(f"/v1/sources/{source['id']}/content")
    assert response.status_code == 200
    assert response.content == HANDBOOK
    assert response.headers["content-type"].startswith("text/markdown")
    assert response.headers["content-disposition"] == 'attachment; filename="handbook.md"'
    assert response.headers["x-content-type-options"] == "nosniff"


def test_a_non_ascii_file_name_is_sent_in_rfc_5987_form(client: TestClient, bucket: str) -> None:
    source = upload(client, bucket, "política de reembolso.txt", REFUNDS).json()["source"]
    response = client.get(f"/v1/sources/{source['id']}/content")
    assert response.headers["content-disposition"] == (
        'attachment; filename="pol_tica de reembolso.txt"; '
        "filename*=UTF-8''pol%C3%ADtica%20de%20reembolso.txt"
    )


def test_the_text_of_a_source_without_pages_has_no_pages(client: TestClient, bucket: str) -> None:
    source = upload(client, bucket, "policy.txt", REFUNDS).json()["source"]
    assert client.get(f"/v1/sources/{source['id']}/text").json() == {
        "object": "source.text",
        "source_id": source["id"],
        "text": REFUNDS.decode(),
        "pages": [],
    }


def test_deleting_a_version_leaves_the_other_versions(client: TestClient, bucket: str) -> None:
    old = upload(client, bucket, "policy.txt", REFUNDS).json()["source"]
    new = upload(client, bucket, "policy.txt", b"Refunds take ninety days.").json()["source"]
    response = client.delete(f"/v1/sources/{new['id']}")
    assert response.json() == {"id": new["id"], "object": "source.deleted", "deleted": True}
    for suffix in ("", "/text", "/content"):
        assert_error(client.get(f"/v1/sources/{new['id']}{suffix}"), 404, code="not_found")
    assert_error(client.delete(f"/v1/sources/{new['id']}"), 404)
    assert client.get(f"/v1/sources/{old['id']}").status_code == 200


# Bad files: each is refused with its own status, and the store is left as it was. ------------
@pytest.fixture
def small_client(settings: Settings) -> Iterator[TestClient]:
    """A client of an app that accepts files of at most 1000 bytes."""
    limited = settings.model_copy(update={"ingest": IngestSettings(max_file_bytes=1000)})
    with TestClient(create_app(limited)) as client:
        client.post("/v1/buckets", json={"slug": "notes"})
        assert upload(client, "notes", "policy.txt", REFUNDS).status_code == 201
        yield client


def assert_store_intact(client: TestClient) -> None:
    sources = client.get("/v1/buckets/notes/sources").json()["data"]
    assert [s["filename"] for s in sources] == ["policy.txt"]
    texts = [r["text"] for r in search(client, "refunds thirty days", ["notes"])["data"]]
    assert texts == [REFUNDS.decode()]


def test_a_file_declared_over_the_limit_is_refused_with_413(small_client: TestClient) -> None:
    response = upload(small_client, "notes", "big.txt", b"x" * 5000)
    error = assert_error(response, 413, code="file_too_large")
    assert error["param"] == "file"
    assert "1000 bytes" in error["message"]
    assert_store_intact(small_client)


def test_a_file_just_over_the_limit_is_refused_with_413(small_client: TestClient) -> None:
    response = upload(small_client, "notes", "big.txt", b"x" * 1001)
    assert assert_error(response, 413, code="file_too_large")["param"] == "file"
    assert_store_intact(small_client)


def test_a_file_streamed_without_a_length_is_cut_off_at_the_limit(
    small_client: TestClient,
) -> None:
    boundary = "citewell-test"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.txt"\r\n\r\n'
    ).encode()

    def body() -> Iterator[bytes]:  # a generator: sent chunked, with no Content-Length
        yield head
        for _ in range(600):
            yield b"x" * 1024
        yield f"\r\n--{boundary}--\r\n".encode()

    response = small_client.post(
        "/v1/buckets/notes/sources",
        content=body(),
        headers={"content-type": f"multipart/form-data; boundary={boundary}"},
    )
    assert "content-length" not in response.request.headers
    assert assert_error(response, 413, code="file_too_large")["param"] == "file"
    assert_store_intact(small_client)


def test_a_file_at_the_limit_is_accepted(small_client: TestClient) -> None:
    response = upload(small_client, "notes", "full.txt", b"word " * 200)
    assert response.status_code == 201


def test_an_unsupported_file_is_refused_with_415(client: TestClient, bucket: str) -> None:
    upload(client, bucket, "policy.txt", REFUNDS)
    blob = b"\x00\x01\xfe\xff" * 100
    error = assert_error(upload(client, bucket, "blob.bin", blob), 415, code="unsupported_file")
    assert error["param"] == "file"
    assert [s["filename"] for s in client.get(f"/v1/buckets/{bucket}/sources").json()["data"]] == [
        "policy.txt"
    ]


def test_a_damaged_pdf_is_refused_with_422(small_client: TestClient, documents: Path) -> None:
    truncated = (documents / "pdf_text" / "multi_page.pdf").read_bytes()[:900]
    response = upload(small_client, "notes", "broken.pdf", truncated)
    assert assert_error(response, 422, code="invalid_file")["param"] == "file"
    assert_store_intact(small_client)
