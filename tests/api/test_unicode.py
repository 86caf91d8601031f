"""Text that is not Unicode scalar text (an unpaired UTF-16 surrogate escape, ``"\\ud800"``) is a
400 in the caller's dialect before anything is written, on every route that takes text; and a
row that holds one anyway never breaks a read.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from citewell.config import Settings
from citewell.scalar_text import has_surrogates, unpaired_escape, without_surrogates
from tests.api.conftest import assert_error, search, upload

LONE = "\\ud800"
"""A lone high surrogate, as JSON writes it (the six characters, not the code point)."""


@pytest.mark.parametrize(
    ("body", "unpaired"),
    [
        (b'{"a": "\\ud800"}', 7),
        (b'{"a": "\\udc00"}', 7),
        (b'{"a": "\\ud83d\\ude00"}', None),  # a pair: an emoji, as ensure_ascii writes it
        (b'{"a": "\\ud83d\\ude00\\ud83d"}', 19),
        (b'{"a": "\\ud83dx\\ude00"}', 7),
        (b'{"a": "\\\\ud800"}', None),  # an escaped backslash, then letters
        (b'{"a": "\\\\\\ud800"}', 9),
        (b'{"a": "\\u00e9\\u4e2d"}', None),
        (b'{"a": "\\uDBFF\\uDFFF"}', None),
        (b'{"a": "\\uDFFF\\uDBFF"}', 7),
    ],
)
def test_unpaired_escapes_are_found_on_the_raw_bytes(body: bytes, unpaired: int | None) -> None:
    assert unpaired_escape(body) == unpaired
    decoded = json.loads(body)
    assert has_surrogates(decoded) == (unpaired is not None)


def test_a_surrogate_is_written_out_as_the_replacement_character() -> None:
    assert without_surrogates("a\ud800b\udfffc") == "a\ufffdb\ufffdc"
    assert has_surrogates({"k": ["x", frozenset({"\udc00"})]})
    assert has_surrogates({"\ud800": 1})


def raw(client: TestClient, method: str, path: str, body: str, **headers: str) -> Any:
    return client.request(
        method, path, content=body.encode(), headers={"content-type": "application/json", **headers}
    )


JSON_ROUTES = [
    ("POST", "/v1/buckets", f'{{"slug": "notes", "name": "N{LONE}"}}'),
    ("POST", "/v1/vector_stores", f'{{"name": "v", "metadata": {{"a": "{LONE}"}}}}'),
    ("POST", "/v1/agents", f'{{"name": "desk", "description": "{LONE}"}}'),
    ("POST", "/v1/keys", f'{{"name": "{LONE}", "permissions": ["ask"]}}'),
    ("POST", "/v1/search", f'{{"query": "refunds{LONE}", "buckets": ["notes"]}}'),
    (
        "POST",
        "/v1/search",
        f'{{"query": "refunds", "buckets": ["notes"],'
        f' "filters": {{"type": "eq", "key": "k", "value": "{LONE}"}}}}',
    ),
    ("POST", "/v1/responses", f'{{"input": "Refunds?", "metadata": {{"k": "{LONE}"}}}}'),
    (
        "POST",
        "/v1/responses",
        f'{{"input": "Refunds?", "stream": true, "metadata": {{"{LONE}": "v"}}}}',
    ),
    (
        "POST",
        "/v1/chat/completions",
        f'{{"model": "citewell-agent", "stream": true,'
        f' "messages": [{{"role": "user", "content": "Refunds{LONE}"}}]}}',
    ),
]


@pytest.mark.parametrize(("method", "path", "body"), JSON_ROUTES)
def test_a_json_body_with_a_lone_surrogate_is_refused_before_anything_is_written(
    client: TestClient, method: str, path: str, body: str
) -> None:
    upload(client, *_bucket_with_a_note(client))
    before = _everything(client)
    error = assert_error(raw(client, method, path, body), 400, code="invalid_unicode")
    assert "surrogate" in error["message"]
    assert _everything(client) == before


def test_messages_refuse_a_lone_surrogate_in_anthropics_shape(client: TestClient) -> None:
    body = (
        '{"model": "citewell-agent", "max_tokens": 50, "stream": true,'
        f' "messages": [{{"role": "user", "content": "Refunds{LONE}?"}}]}}'
    )
    response = raw(client, "POST", "/v1/messages", body, **{"anthropic-version": "2023-06-01"})
    assert response.status_code == 400
    assert response.json()["type"] == "error"
    assert response.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize("field", ["metadata", "acl"])
def test_an_upload_with_a_lone_surrogate_in_a_field_is_refused_and_not_stored(
    client: TestClient, field: str
) -> None:
    slug, filename, data = _bucket_with_a_note(client)
    value = '{"k": "\\ud800"}' if field == "metadata" else '["\\ud800"]'
    refused = upload(client, slug, filename, data, **{field: value})
    error = assert_error(refused, 400, code="invalid_value")
    assert error["param"] == field
    assert client.get(f"/v1/buckets/{slug}/sources").json()["data"] == []


def test_paths_and_queries_cannot_carry_a_surrogate(client: TestClient) -> None:
    """They are decoded from bytes, with the bytes of an encoded surrogate replaced."""
    slug, _, _ = _bucket_with_a_note(client)
    assert_error(client.get("/v1/buckets/%ED%A0%80"), 404, code="not_found")
    listed = client.get(f"/v1/buckets/{slug}/sources?include_superseded=%ED%A0%80")
    assert_error(listed, 400)


# Bytes that are not UTF-8 ------------------------------------------------------------------------

SURROGATE_BYTES = b"\xed\xa0\x80"
"""An encoded surrogate: bytes no UTF-8 decoder accepts (Latin-1 reads them as 'í\\xa0\\x80')."""
BOUNDARY = "b0undary"


def form(*parts: tuple[bytes, bytes]) -> bytes:
    """A multipart body of (Content-Disposition parameters, content) parts, as raw bytes."""
    body = b"".join(
        f"--{BOUNDARY}\r\nContent-Disposition: form-data; ".encode()
        + head
        + b"\r\n\r\n"
        + data
        + b"\r\n"
        for head, data in parts
    )
    return body + f"--{BOUNDARY}--\r\n".encode()


def post_form(client: TestClient, path: str, body: bytes) -> Any:
    headers = {"content-type": f"multipart/form-data; boundary={BOUNDARY}"}
    return client.post(path, content=body, headers=headers)


NOTE = (b'name="file"; filename="refunds.txt"', b"Refunds take thirty days.")
FORM_ROUTES = [
    pytest.param(
        "/v1/buckets/notes/sources",
        form(NOTE, (b'name="metadata"', b'{"k": "' + SURROGATE_BYTES + b'"}')),
        "metadata",
        id="a source's metadata",
    ),
    pytest.param(
        "/v1/buckets/notes/sources",
        form((b'name="acl"', b'["hr' + SURROGATE_BYTES + b'"]'), NOTE),
        "acl",
        id="a source's acl, before the file",
    ),
    pytest.param(
        "/v1/buckets/notes/sources",
        form(NOTE, (b'name="effective_date"', b"2026-01-0" + b"\xff")),
        "effective_date",
        id="a source's effective date",
    ),
    pytest.param(
        "/v1/buckets/notes/sources",
        form((b'name="file"; filename="refunds' + SURROGATE_BYTES + b'.txt"', NOTE[1])),
        "file",
        id="a source's file name",
    ),
    pytest.param(
        "/v1/files",
        form(NOTE, (b'name="purpose"', b"assistants" + SURROGATE_BYTES)),
        "purpose",
        id="a file's purpose",
    ),
    pytest.param(
        "/v1/files",
        form(NOTE, (b'name="purpose"', b"user_data\xc3")),
        "purpose",
        id="a field ending inside a character",
    ),
    pytest.param(
        "/v1/files",
        form(NOTE, (b'name="purp' + SURROGATE_BYTES + b'"', b"assistants")),
        "purp\ufffd\ufffd\ufffd",
        id="a field's name",
    ),
    pytest.param(
        "/v1/buckets/import",
        form(
            (b'name="file"; filename="notes.zip"', b"PK\x05\x06" + bytes(18)),
            (b'name="slug"', SURROGATE_BYTES),
        ),
        "slug",
        id="an imported bucket's slug",
    ),
]


@pytest.mark.parametrize(("path", "body", "field"), FORM_ROUTES)
def test_a_form_field_that_is_not_utf8_is_refused_naming_it_and_nothing_is_stored(
    client: TestClient, path: str, body: bytes, field: str
) -> None:
    upload(client, *_bucket_with_a_note(client))
    before = _everything(client)
    error = assert_error(post_form(client, path, body), 400, code="invalid_unicode")
    assert error["param"] == field
    assert f"{field!r}" in error["message"] and "UTF-8" in error["message"]
    assert _everything(client) == before


def test_a_form_of_valid_utf8_in_three_scripts_is_stored_as_sent(client: TestClient) -> None:
    slug, filename, data = _bucket_with_a_note(client)
    metadata = {"título": "Política de reembolsos", "部门": "客服", "note": "ok 🙂"}
    body = form(
        (f'name="file"; filename="{filename}"'.encode(), data),
        (b'name="metadata"', json.dumps(metadata, ensure_ascii=False).encode()),
    )
    stored = post_form(client, f"/v1/buckets/{slug}/sources", body)
    assert stored.status_code == 201, stored.text
    assert stored.json()["source"]["metadata"] == metadata


def test_a_urlencoded_field_that_is_not_utf8_is_refused(client: TestClient) -> None:
    refused = client.post(
        "/v1/files",
        content=b"purpose=assistants%ED%A0%80",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert assert_error(refused, 400, code="invalid_unicode")["param"] == "purpose"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/buckets", b'{"slug": "other", "name": "N' + SURROGATE_BYTES + b'"}', "name"),
        (
            "/v1/vector_stores",
            b'{"name": "v", "metadata": {"team": "' + SURROGATE_BYTES + b'"}}',
            "metadata.team",
        ),
        (
            "/v1/chat/completions",
            b'{"model": "citewell-agent", "messages": [{"role": "user", "content": "Re\xc3("}]}',
            "messages[0].content",
        ),
        ("/v1/search", b'{"query": "refunds", "buckets": ["notes"]\xff', None),
    ],
)
def test_a_json_body_that_is_not_utf8_is_refused_naming_the_field(
    client: TestClient, path: str, body: bytes, field: str | None
) -> None:
    upload(client, *_bucket_with_a_note(client))
    before = _everything(client)
    response = client.post(path, content=body, headers={"content-type": "application/json"})
    error = assert_error(response, 400, code="invalid_unicode")
    assert error["param"] == field
    assert error["message"].startswith(f"The field {field!r}" if field else "The body")
    assert _everything(client) == before


def test_messages_refuse_bytes_that_are_not_utf8_in_anthropics_shape(client: TestClient) -> None:
    body = (
        b'{"model": "citewell-agent", "max_tokens": 50,'
        b' "messages": [{"role": "user", "content": "Refunds' + SURROGATE_BYTES + b'?"}]}'
    )
    response = client.post(
        "/v1/messages",
        content=body,
        headers={"content-type": "application/json", "anthropic-version": "2023-06-01"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert "'messages[0].content' is not valid UTF-8" in response.json()["error"]["message"]


def test_a_stored_row_with_a_surrogate_is_read_with_the_replacement_character(
    settings: Settings, tmp_path: Path
) -> None:
    """A row stored before requests were checked: listing, reading, searching and answering
    over it never fail; the surrogate reads as U+FFFD."""
    if settings.database_url is not None:
        pytest.skip("the row is planted with SQLite")
    from citewell.api import create_app

    with TestClient(create_app(settings)) as client:
        slug, filename, data = _bucket_with_a_note(client)
        source = upload(client, slug, filename, data, metadata='{"k": "v"}').json()["source"]
    conn = sqlite3.connect(settings.data_dir / "citewell.db")
    with conn:
        conn.execute(
            "UPDATE sources SET metadata = ?, acl = ? WHERE id = ?",
            ('{"k": "\\ud800"}', "[]", source["id"]),
        )
    conn.close()
    with TestClient(create_app(settings)) as client:
        listed = client.get(f"/v1/buckets/{slug}/sources")
        assert listed.status_code == 200
        assert listed.json()["data"][0]["metadata"] == {"k": "\ufffd"}
        assert client.get(f"/v1/sources/{source['id']}").json()["metadata"] == {"k": "\ufffd"}
        found = search(client, "refunds", [slug])
        assert found["data"][0]["source"]["metadata"] == {"k": "\ufffd"}
        streamed = client.post(
            "/v1/responses",
            json={
                "input": "How long do refunds take?",
                "stream": True,
                "include": ["file_search_call.results"],
            },
        )
        assert streamed.status_code == 200
        assert "event: response.completed" in streamed.text


def _bucket_with_a_note(client: TestClient) -> tuple[str, str, bytes]:
    client.post("/v1/buckets", json={"slug": "notes"})
    return "notes", "refunds.txt", b"Refunds take thirty days from the date of purchase."


def _everything(client: TestClient) -> dict[str, Any]:
    """What the tenant holds, as its lists show it."""
    return {
        path: client.get(path).json()
        for path in (
            "/v1/buckets",
            "/v1/buckets/notes/sources",
            "/v1/vector_stores",
            "/v1/agents",
            "/v1/files",
        )
    }
