"""Isolation on every write route: a key limited by ACL labels never learns of, changes,
supersedes or deletes a source hidden from it.

The operator holds ``salaries.md`` in bucket ``acltest`` under the label ``hr``. Key K may ingest,
search and delete in that bucket, with the label ``eng`` only; key L may also manage (import
buckets), with the same label and no bucket restriction. Every response a write route gives K or
L is searched for anything of the hidden source (its id, file name, text, label), and afterwards
the hidden source is exactly as it was, still current, for an ``hr`` reader too.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from citewell.api import create_app
from citewell.config import RetrieveSettings, Settings
from tests.api.conftest import assert_error, upload

OPERATOR = "operator-key"
SALARIES = b"Salaries of the Glimmerbrook team rise by four percent in May."
"""The hidden source's bytes; 'Glimmerbrook' is found nowhere else."""
OTHER = b"The eng offsite is in Porto."


@dataclass(frozen=True)
class World:
    client: TestClient
    tokens: dict[str, str]
    """K, L (labels eng) and hr (a reader with label hr), by name."""
    hidden: dict[str, Any]
    """The hidden source as the operator saw it after uploading it."""


def headers(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@pytest.fixture
def world(tmp_path: Any) -> Iterator[World]:
    settings = Settings(
        data_dir=tmp_path / "data",
        retrieve=RetrieveSettings(embedder="use", threads=1),
        admin_key=SecretStr(OPERATOR),
    )
    with TestClient(create_app(settings)) as client:
        operator = headers(OPERATOR)
        bucket = client.post("/v1/buckets", json={"slug": "acltest"}, headers=operator).json()
        client.headers.update(operator)
        sent = upload(client, "acltest", "salaries.md", SALARIES, acl='["hr"]')
        client.headers.pop("authorization")
        assert sent.status_code == 201, sent.text

        def key(**body: Any) -> str:
            made = client.post("/v1/keys", json=body, headers=operator)
            assert made.status_code == 201, made.text
            secret: str = made.json()["secret"]
            return secret

        tokens = {
            "K": key(
                permissions=["ingest", "search", "delete"],
                bucket_ids=[bucket["id"]],
                acl_labels=["eng"],
            ),
            "L": key(permissions=["ingest", "search", "manage", "delete"], acl_labels=["eng"]),
            "hr": key(permissions=["search"], acl_labels=["hr"]),
        }
        yield World(client, tokens, sent.json()["source"])


def revealed(world: World, response: httpx.Response) -> list[str]:
    """What of the hidden source the response shows."""
    text = response.text
    if response.headers.get("content-type") == "application/zip":
        with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
            text = "\n".join(archive.read(n).decode("utf-8", "replace") for n in archive.namelist())
    # Not its hash: a caller that sends the same bytes knows their hash already.
    tells = {"id": world.hidden["id"], "text": "Glimmerbrook", "label": '"hr"'}
    return [what for what, tell in tells.items() if tell in text]


def assert_hidden_source_untouched(world: World) -> None:
    client, hidden = world.client, world.hidden
    now = client.get(f"/v1/sources/{hidden['id']}", headers=headers(OPERATOR)).json()
    assert now == hidden
    text = client.get(f"/v1/sources/{hidden['id']}/text", headers=headers(world.tokens["hr"]))
    assert text.json()["text"] == SALARIES.decode()
    listed = client.get("/v1/buckets/acltest/sources", headers=headers(world.tokens["hr"]))
    assert hidden["id"] in [s["id"] for s in listed.json()["data"]]


def as_key(world: World, name: str) -> TestClient:
    world.client.headers.update(headers(world.tokens[name]))
    return world.client


def test_the_same_bytes_under_another_name_are_a_new_source_of_the_callers_own(
    world: World,
) -> None:
    sent = upload(as_key(world, "K"), "acltest", "copy.md", SALARIES)
    assert sent.status_code == 201, sent.text
    body = sent.json()
    assert (body["outcome"], body["superseded"]) == ("created", None)
    source = body["source"]
    assert (source["filename"], source["acl"], source["version"]) == ("copy.md", [], 1)
    assert source["id"] != world.hidden["id"]
    # The file's own hash: the caller sent these bytes, it knows it already.
    assert source["content_hash"] == world.hidden["content_hash"]
    assert revealed(world, sent) == []
    # Sent again, the caller's own copy is what it is told about.
    again = upload(world.client, "acltest", "copy.md", SALARIES)
    assert (again.status_code, again.json()["source"]["id"]) == (200, source["id"])
    assert_hidden_source_untouched(world)


def test_the_same_bytes_under_the_hidden_name_start_a_version_chain_of_their_own(
    world: World,
) -> None:
    sent = upload(as_key(world, "K"), "acltest", "salaries.md", SALARIES)
    assert sent.status_code == 201, sent.text
    assert (sent.json()["outcome"], sent.json()["source"]["supersedes"]) == ("created", None)
    assert_hidden_source_untouched(world)


def test_other_bytes_under_the_hidden_name_supersede_nothing(world: World) -> None:
    sent = upload(as_key(world, "K"), "acltest", "salaries.md", OTHER)
    assert sent.status_code == 201, sent.text
    body = sent.json()
    assert (body["outcome"], body["superseded"], body["source"]["version"]) == ("created", None, 1)
    assert revealed(world, sent) == []
    assert_hidden_source_untouched(world)
    # The caller's next version supersedes its own.
    newer = upload(world.client, "acltest", "salaries.md", OTHER + b" In June.")
    assert newer.json()["superseded"]["id"] == body["source"]["id"]
    assert_hidden_source_untouched(world)


def test_a_caller_cannot_label_a_source_so_that_it_could_not_see_it(world: World) -> None:
    for data in (SALARIES, OTHER):
        refused = upload(as_key(world, "K"), "acltest", "salaries.md", data, acl='["hr"]')
        error = assert_error(refused, 403, code="permission_denied")
        assert error["param"] == "acl"
        assert revealed(world, refused) == []
    listed = world.client.get("/v1/buckets/acltest/sources").json()["data"]
    assert listed == []
    assert_hidden_source_untouched(world)


@pytest.mark.parametrize(
    "route",
    [
        "GET /v1/sources/{id}",
        "GET /v1/sources/{id}/text",
        "GET /v1/sources/{id}/content",
        "DELETE /v1/sources/{id}",
    ],
)
def test_a_hidden_source_is_answered_as_one_that_does_not_exist(world: World, route: str) -> None:
    method, path = route.split()
    client = as_key(world, "K")
    absent = "src_" + "0" * 24
    hidden = client.request(method, path.format(id=world.hidden["id"]))
    missing = client.request(method, path.format(id=absent))
    assert_error(hidden, 404, code="not_found")
    assert_error(missing, 404, code="not_found")
    assert hidden.json() == json.loads(missing.text.replace(absent, world.hidden["id"]))
    assert_hidden_source_untouched(world)


def test_another_tenants_source_is_answered_as_one_that_does_not_exist(world: World) -> None:
    client = world.client
    operator = headers(OPERATOR)
    tenant = client.post("/v1/tenants", json={"name": "B"}, headers=operator).json()["id"]
    made = client.post(
        "/v1/keys",
        json={"tenant_id": tenant, "permissions": ["search", "delete"]},
        headers=operator,
    )
    other = headers(made.json()["secret"])
    for method, path in (
        ("GET", "/v1/sources/{id}"),
        ("GET", "/v1/sources/{id}/text"),
        ("GET", "/v1/sources/{id}/content"),
        ("DELETE", "/v1/sources/{id}"),
    ):
        response = client.request(method, path.format(id=world.hidden["id"]), headers=other)
        error = assert_error(response, 404, code="not_found")
        assert error["message"] == f"no source '{world.hidden['id']}'"
        assert world.hidden["bucket_id"] not in response.text
    assert_hidden_source_untouched(world)


def exported(world: World) -> bytes:
    archive = world.client.get("/v1/buckets/acltest/export", headers=headers(OPERATOR))
    assert archive.status_code == 200
    return archive.content


def test_an_import_may_not_bring_in_sources_the_importer_could_not_see(world: World) -> None:
    client = as_key(world, "L")
    refused = client.post(
        "/v1/buckets/import",
        files={"file": ("acltest.zip", exported(world))},
        data={"slug": "mine"},
    )
    assert_error(refused, 403, code="permission_denied")
    assert [b["slug"] for b in client.get("/v1/buckets").json()["data"]] == ["acltest"]
    # A key restricted to buckets may not import at all (the new bucket is outside them).
    refused = as_key(world, "K").post(
        "/v1/buckets/import", files={"file": ("acltest.zip", exported(world))}, data={"slug": "k"}
    )
    assert_error(refused, 403, code="permission_denied")
    assert_hidden_source_untouched(world)


def test_attaching_a_file_of_the_hidden_bytes_to_a_vector_store_stores_the_callers_own(
    world: World,
) -> None:
    client = as_key(world, "K")
    file = client.post(
        "/v1/files", files={"file": ("pay.md", SALARIES)}, data={"purpose": "assistants"}
    )
    assert file.status_code == 200, file.text
    store_id = world.hidden["bucket_id"]
    attached = client.post(
        f"/v1/vector_stores/{store_id}/files", json={"file_id": file.json()["id"]}
    )
    assert attached.status_code == 200, attached.text
    assert attached.json()["id"] == file.json()["id"]
    assert revealed(world, attached) == []
    listed = client.get(f"/v1/vector_stores/{store_id}/files")
    assert [f["id"] for f in listed.json()["data"]] == [file.json()["id"]]
    assert revealed(world, listed) == []
    assert_hidden_source_untouched(world)


def delete_listed(client: TestClient) -> httpx.Response:
    """Delete every source the caller lists in the bucket; the last listing."""
    listed = client.get("/v1/buckets/acltest/sources", params={"include_superseded": True})
    for source in listed.json()["data"]:
        assert client.delete(f"/v1/sources/{source['id']}").status_code == 200
    return listed


WRITES: dict[str, Callable[[TestClient, World], httpx.Response]] = {
    "upload": lambda c, w: upload(c, "acltest", "salaries.md", OTHER),
    "upload the same bytes": lambda c, w: upload(c, "acltest", "salaries.md", SALARIES),
    "delete what it lists": lambda c, w: delete_listed(c),
    "vector store files": lambda c, w: c.get(f"/v1/vector_stores/{w.hidden['bucket_id']}/files"),
    "search": lambda c, w: c.post(
        "/v1/search", json={"query": "salaries rise in May", "buckets": ["acltest"]}
    ),
}


@pytest.mark.parametrize("name", list(WRITES))
def test_after_any_write_of_k_nothing_of_the_hidden_source_shows_or_changes(
    world: World, name: str
) -> None:
    client = as_key(world, "K")
    for _ in range(2):  # twice: the second meets what the first stored
        response = WRITES[name](client, world)
        assert response.status_code < 500, response.text
        assert revealed(world, response) == [], f"{name} showed K the hidden source"
    assert_hidden_source_untouched(world)
