"""Buckets renamed, exported, deleted for good and imported again, over HTTP.

The round trip the issue asks for: export a bucket, delete it, import it into another tenant, and
the same questions get the same answers with the same citations.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from citewell.api import create_app
from citewell.api.deps import get_principal
from citewell.config import Settings
from citewell.model import Principal
from tests.api.conftest import Response, assert_error, search, upload

REFUNDS_V1 = b"# Refunds\n\nA refund is paid within thirty days of the request.\n"
REFUNDS_V2 = (
    b"# Refunds\n\nA refund is paid within fourteen days of the request, to the card used.\n"
)
BROKEN_PDF = b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog"
QUESTIONS = ("Who patented the typewriter, and when?", "How long does a refund take?")
SAME_CITATION = (
    "filename",
    "index",
    "start_index",
    "end_index",
    "source_index",
    "cited_text",
    "cited_start_index",
    "cited_end_index",
    "page_number",
    "page_label",
    "support",
)
"""What an annotation says about where its text comes from; ids differ between stores."""


@pytest.fixture
def pdf(documents: Path) -> bytes:
    return (documents / "pdf_text" / "multi_page.pdf").read_bytes()


@pytest.fixture
def handbook(client: TestClient, pdf: bytes) -> dict[str, Any]:
    """The bucket 'handbook': a PDF with an ACL label and metadata, and a file in two versions.

    Returns the sources listed with their superseded versions, in export order.
    """
    created = client.post("/v1/buckets", json={"slug": "handbook", "name": "Staff handbook"})
    assert created.status_code == 201
    form = {"acl": '["staff"]', "metadata": '{"team": "history", "year": 2024}'}
    assert upload(client, "handbook", "multi_page.pdf", pdf, **form).status_code == 201
    assert upload(client, "handbook", "refunds.md", REFUNDS_V1).status_code == 201
    newer = upload(client, "handbook", "refunds.md", REFUNDS_V2, effective_date="2024-03-01")
    assert newer.json()["outcome"] == "new_version"
    listed = client.get("/v1/buckets/handbook/sources?include_superseded=true").json()
    return {"bucket": created.json(), "sources": listed["data"]}


def act_as(client: TestClient, principal: Principal) -> None:
    client.app.dependency_overrides[get_principal] = lambda: principal  # type: ignore[attr-defined]


def ask(client: TestClient, question: str, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/responses", json={"input": question, **body})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def cited(response: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """An answer's text, and where each annotation says its text comes from."""
    part = response["output"][-1]["content"][0]
    places = [{k: a[k] for k in SAME_CITATION} for a in part["annotations"]]
    return part["text"], places


def export(client: TestClient, bucket: str = "handbook") -> bytes:
    response = client.get(f"/v1/buckets/{bucket}/export")
    assert response.status_code == 200, response.text
    return response.content


def import_(client: TestClient, archive: bytes, **form: str) -> Response:
    files = {"file": ("handbook.citewell.zip", archive)}
    return client.post("/v1/buckets/import", files=files, data=form)


def rebuilt(
    archive: bytes,
    change_manifest: Callable[[dict[str, Any]], Any] = lambda manifest: manifest,
    change_entries: Callable[[dict[str, bytes]], dict[str, bytes]] = lambda entries: entries,
) -> bytes:
    """The archive with its manifest and entries changed."""
    with zipfile.ZipFile(io.BytesIO(archive)) as original:
        entries = {name: original.read(name) for name in original.namelist()}
    manifest = change_manifest(json.loads(entries["manifest.json"]))
    entries["manifest.json"] = json.dumps(manifest).encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as target:
        for name, data in change_entries(entries).items():
            target.writestr(name, data)
    return out.getvalue()


# export --------------------------------------------------------------------------------------
def test_an_export_is_a_zip_of_a_manifest_and_every_original_once(
    client: TestClient, handbook: dict[str, Any], pdf: bytes
) -> None:
    response = client.get("/v1/buckets/handbook/export")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/zip"
    assert response.headers["content-disposition"] == (
        'attachment; filename="handbook.citewell.zip"'
    )
    assert int(response.headers["content-length"]) == len(response.content)
    pdf_v1, refunds_v1, refunds_v2 = handbook["sources"]
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        assert archive.namelist() == [
            "manifest.json",
            *(f"originals/{s['content_hash']}" for s in handbook["sources"]),
        ]
        manifest = json.loads(archive.read("manifest.json"))
        originals = [archive.read(f"originals/{s['content_hash']}") for s in handbook["sources"]]
    assert originals == [pdf, REFUNDS_V1, REFUNDS_V2]
    exported_at = dt.datetime.fromisoformat(manifest.pop("exported_at"))
    assert abs(exported_at - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=5)
    created = [dt.datetime.fromisoformat(s.pop("created_at")) for s in manifest["sources"]]
    assert [int(c.timestamp()) for c in created] == [s["created_at"] for s in handbook["sources"]]
    assert manifest == {
        "format": "citewell.bucket",
        "format_version": 1,
        "bucket": {"slug": "handbook", "name": "Staff handbook"},
        "sources": [
            {
                "id": pdf_v1["id"],
                "filename": "multi_page.pdf",
                "mime_type": "application/pdf",
                "content_hash": pdf_v1["content_hash"],
                "byte_size": len(pdf),
                "version": 1,
                "supersedes": None,
                "acl": ["staff"],
                "metadata": {"team": "history", "year": 2024},
                "effective_date": None,
            },
            {
                "id": refunds_v1["id"],
                "filename": "refunds.md",
                "mime_type": "text/markdown",
                "content_hash": refunds_v1["content_hash"],
                "byte_size": len(REFUNDS_V1),
                "version": 1,
                "supersedes": None,
                "acl": [],
                "metadata": {},
                "effective_date": None,
            },
            {
                "id": refunds_v2["id"],
                "filename": "refunds.md",
                "mime_type": "text/markdown",
                "content_hash": refunds_v2["content_hash"],
                "byte_size": len(REFUNDS_V2),
                "version": 2,
                "supersedes": refunds_v1["id"],
                "acl": [],
                "metadata": {},
                "effective_date": "2024-03-01",
            },
        ],
    }


def test_an_export_holds_only_the_sources_the_caller_sees(
    client: TestClient, handbook: dict[str, Any]
) -> None:
    act_as(client, Principal())  # holds no ACL label: the PDF is hidden from it
    with zipfile.ZipFile(io.BytesIO(export(client))) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        assert len(archive.namelist()) == 3
    assert [s["filename"] for s in manifest["sources"]] == ["refunds.md", "refunds.md"]


def test_exporting_an_unknown_bucket_is_404(client: TestClient) -> None:
    assert_error(client.get("/v1/buckets/nope/export"), 404, code="not_found")


# the round trip ------------------------------------------------------------------------------
def test_export_delete_and_import_into_another_tenant_gives_the_same_cited_answers(
    client: TestClient, handbook: dict[str, Any], settings: Settings
) -> None:
    before = [ask(client, question) for question in QUESTIONS]
    assert [len(cited(response)[1]) for response in before] == [1, 1]
    assert cited(before[0])[1][0]["page_number"] == 1
    archive = export(client)

    assert client.delete("/v1/buckets/handbook").status_code == 200
    for response in before:
        assert_error(client.get(f"/v1/responses/{response['id']}"), 404, code="not_found")
    blobs = settings.data_dir / "blobs"
    assert [p for p in blobs.rglob("*") if p.is_file()] == []
    after_delete = ask(client, QUESTIONS[1])
    assert cited(after_delete)[1] == []
    assert "fourteen" not in after_delete["output"][-1]["content"][0]["text"]

    act_as(client, Principal(tenant_id="t2", sees_all_labels=True))
    imported = import_(client, archive)
    assert imported.status_code == 201, imported.text
    bucket = imported.json()
    assert (bucket["slug"], bucket["name"]) == ("handbook", "Staff handbook")
    assert bucket["id"] != handbook["bucket"]["id"]
    listed = client.get("/v1/buckets/handbook/sources?include_superseded=true").json()["data"]
    kept = ("filename", "content_hash", "version", "acl", "metadata", "effective_date")
    assert [{k: s[k] for k in kept} for s in listed] == [
        {k: s[k] for k in kept} for s in handbook["sources"]
    ]
    assert listed[2]["supersedes"] == listed[1]["id"]
    assert [cited(ask(client, question)) for question in QUESTIONS] == [
        cited(response) for response in before
    ]
    assert [b["slug"] for b in client.get("/v1/buckets").json()["data"]] == ["handbook"]


def test_an_import_takes_the_slug_it_is_given(client: TestClient, handbook: dict[str, Any]) -> None:
    imported = import_(client, export(client), slug="copy")
    assert imported.status_code == 201, imported.text
    assert imported.json()["slug"] == "copy"
    copies = client.get("/v1/buckets/copy/sources?include_superseded=true").json()["data"]
    assert [s["content_hash"] for s in copies] == [s["content_hash"] for s in handbook["sources"]]


def test_importing_onto_a_slug_in_use_is_409_and_changes_nothing(
    client: TestClient, handbook: dict[str, Any]
) -> None:
    before = client.get("/v1/buckets").json()
    error = assert_error(import_(client, export(client)), 409, code="conflict")
    assert error["param"] == "slug"
    assert client.get("/v1/buckets").json() == before


# delete means gone ---------------------------------------------------------------------------
def test_deleting_a_source_deletes_every_trace_of_its_text(
    client: TestClient, handbook: dict[str, Any]
) -> None:
    client.post("/v1/buckets", json={"slug": "history"})
    upload(client, "history", "note.txt", b"The typewriter was patented in 1868.")
    newest = handbook["sources"][2]
    citing = ask(client, QUESTIONS[1])
    elsewhere = ask(
        client, QUESTIONS[0], tools=[{"type": "file_search", "vector_store_ids": ["history"]}]
    )
    assert [a["file_id"] for a in citing["output"][-1]["content"][0]["annotations"]] == [
        newest["id"]
    ]

    assert client.delete(f"/v1/sources/{newest['id']}").status_code == 200
    assert_error(client.get(f"/v1/responses/{citing['id']}"), 404, code="not_found")
    assert client.get(f"/v1/responses/{elsewhere['id']}").status_code == 200
    assert_error(client.get(f"/v1/sources/{newest['id']}/text"), 404)
    assert_error(client.get(f"/v1/sources/{newest['id']}/content"), 404)
    found = search(client, "refund fourteen days card", ["handbook"])["data"]
    assert newest["id"] not in {hit["file_id"] for hit in found}
    assert not any("fourteen" in hit["text"] for hit in found)
    text, places = cited(ask(client, QUESTIONS[1]))
    assert "fourteen" not in text
    assert [p["cited_text"] for p in places] == [
        "A refund is paid within thirty days of the request."
    ]
    with zipfile.ZipFile(io.BytesIO(export(client))) as archive:
        assert f"originals/{newest['content_hash']}" not in archive.namelist()
    library = client.app.state.library  # type: ignore[attr-defined]
    assert not library.store.blobs.exists(newest["content_hash"])
    traces = [t.trace.model_dump_json() for t in library.store.list_traces()]
    assert len(traces) == 3
    assert not any("fourteen" in trace for trace in traces)


# rename --------------------------------------------------------------------------------------
def test_a_bucket_is_renamed_by_slug_and_name_and_keeps_its_id_and_sources(
    client: TestClient, handbook: dict[str, Any]
) -> None:
    response = client.post("/v1/buckets/handbook", json={"slug": "manual", "name": "Manual"})
    assert response.status_code == 200
    renamed = response.json()
    assert renamed == {**handbook["bucket"], "slug": "manual", "name": "Manual"}
    assert client.get("/v1/buckets/manual").json() == renamed
    assert_error(client.get("/v1/buckets/handbook"), 404)
    assert len(client.get("/v1/buckets/manual/sources").json()["data"]) == 2
    assert client.post("/v1/buckets", json={"slug": "handbook"}).status_code == 201


def test_renaming_changes_only_the_fields_given(client: TestClient, bucket: str) -> None:
    created = client.get(f"/v1/buckets/{bucket}").json()
    named = client.post(f"/v1/buckets/{bucket}", json={"name": "My notes"}).json()
    assert named == {**created, "name": "My notes"}
    assert client.post(f"/v1/buckets/{bucket}", json={}).json() == named
    assert client.post(f"/v1/buckets/{created['id']}", json={"slug": bucket}).json() == named


def test_renaming_onto_a_slug_in_use_is_409_and_changes_nothing(
    client: TestClient, bucket: str
) -> None:
    client.post("/v1/buckets", json={"slug": "other"})
    before = client.get("/v1/buckets").json()
    response = client.post(f"/v1/buckets/{bucket}", json={"slug": "other", "name": "Clash"})
    error = assert_error(response, 409, code="conflict")
    assert (error["param"], error["message"]) == (
        "slug",
        "a bucket with slug 'other' already exists",
    )
    assert client.get("/v1/buckets").json() == before


@pytest.mark.parametrize(
    ("body", "param"),
    [({"slug": "Not A Slug"}, "slug"), ({"name": ""}, "name"), ({"colour": "red"}, "colour")],
)
def test_an_invalid_rename_is_400(
    client: TestClient, bucket: str, body: dict[str, str], param: str
) -> None:
    assert assert_error(client.post(f"/v1/buckets/{bucket}", json=body), 400)["param"] == param


def test_renaming_an_unknown_bucket_is_404(client: TestClient) -> None:
    assert_error(client.post("/v1/buckets/nope", json={"name": "x"}), 404, code="not_found")


# hostile and damaged archives ----------------------------------------------------------------
@pytest.fixture
def small_archive(client: TestClient) -> bytes:
    """The export of a bucket holding one file in two versions."""
    client.post("/v1/buckets", json={"slug": "small"})
    upload(client, "small", "refunds.md", REFUNDS_V1)
    upload(client, "small", "refunds.md", REFUNDS_V2)
    return export(client, "small")


def _first_original(entries: dict[str, bytes]) -> str:
    return next(name for name in entries if name.startswith("originals/"))


def _without(name: str) -> Callable[[dict[str, bytes]], dict[str, bytes]]:
    return lambda entries: {k: v for k, v in entries.items() if k != name}


def _renamed_manifest(entries: dict[str, bytes]) -> dict[str, bytes]:
    return {"../manifest.json" if k == "manifest.json" else k: v for k, v in entries.items()}


def _added(name: str) -> Callable[[dict[str, bytes]], dict[str, bytes]]:
    return lambda entries: {**entries, name: b"#!/bin/sh\n"}


def _tampered(entries: dict[str, bytes]) -> dict[str, bytes]:
    name = _first_original(entries)
    return {**entries, name: entries[name].replace(b"thirty", b"ninety")}


def _version(number: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda manifest: {**manifest, "format_version": number}


def _reordered(manifest: dict[str, Any]) -> dict[str, Any]:
    return {**manifest, "sources": manifest["sources"][::-1]}


HOSTILE: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "not a zip": (lambda archive: b"PK\x03\x04 but not really", "not a zip file"),
    "manifest not JSON": (
        lambda archive: rebuilt(archive, change_entries=lambda e: {**e, "manifest.json": b"{"}),
        "manifest.json is not JSON",
    ),
    "no manifest": (
        lambda archive: rebuilt(archive, change_entries=_without("manifest.json")),
        "it has no manifest.json",
    ),
    "another format": (
        lambda archive: rebuilt(archive, lambda m: {**m, "format": "other"}),
        "does not describe a citewell.bucket archive",
    ),
    "a newer format version": (
        lambda archive: rebuilt(archive, _version(2)),
        "format version 2 is not supported (this citewell reads version 1)",
    ),
    "a path out of the archive": (
        lambda archive: rebuilt(archive, change_entries=_renamed_manifest),
        "unexpected entry '../manifest.json'",
    ),
    "an absolute path": (
        lambda archive: rebuilt(archive, change_entries=_added("/etc/cron.d/x")),
        "unexpected entry '/etc/cron.d/x'",
    ),
    "an original missing": (
        lambda archive: rebuilt(archive, change_entries=lambda e: _without(_first_original(e))(e)),
        "is listed in the manifest but missing",
    ),
    "an original not listed": (
        lambda archive: rebuilt(archive, change_entries=_added("originals/" + "0" * 64)),
        f"originals/{'0' * 64} is not listed in the manifest",
    ),
    "an original changed": (
        lambda archive: rebuilt(archive, change_entries=_tampered),
        "does not match its SHA-256 and size",
    ),
    "versions out of order": (
        lambda archive: rebuilt(archive, _reordered),
        "the versions of 'refunds.md' are out of order",
    ),
    "a source without a hash": (
        lambda archive: rebuilt(
            archive, lambda m: {**m, "sources": [{**m["sources"][0], "content_hash": "x"}]}
        ),
        "manifest.json: sources.0.content_hash:",
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_damaged_or_hostile_archive_is_refused_and_nothing_is_imported(
    client: TestClient, small_archive: bytes, case: str
) -> None:
    damage, reason = HOSTILE[case]
    before = client.get("/v1/buckets").json()
    error = assert_error(import_(client, damage(small_archive), slug="copy"), 422)
    assert error["code"] == "invalid_file"
    assert error["param"] == "file"
    assert error["message"].startswith("handbook.citewell.zip is not a valid bucket archive: ")
    assert reason in error["message"]
    assert client.get("/v1/buckets").json() == before


def test_a_file_that_fails_mid_import_leaves_no_bucket_behind(
    client: TestClient, small_archive: bytes
) -> None:
    """The first file is ingested, the second is a damaged PDF: the first goes too."""
    digest = hashlib.sha256(BROKEN_PDF).hexdigest()

    def broken_second(manifest: dict[str, Any]) -> dict[str, Any]:
        first, second = manifest["sources"]
        second = {
            **second,
            "filename": "broken.pdf",
            "mime_type": "application/pdf",
            "content_hash": digest,
            "byte_size": len(BROKEN_PDF),
            "supersedes": None,
        }
        return {**manifest, "sources": [first, second]}

    def broken_original(entries: dict[str, bytes]) -> dict[str, bytes]:
        last = [name for name in entries if name.startswith("originals/")][-1]
        return {**_without(last)(entries), f"originals/{digest}": BROKEN_PDF}

    before = client.get("/v1/buckets").json()
    archive = rebuilt(small_archive, broken_second, broken_original)
    error = assert_error(import_(client, archive, slug="copy"), 422, code="invalid_file")
    assert error["message"].startswith("broken.pdf ")
    assert client.get("/v1/buckets").json() == before
    library = client.app.state.library  # type: ignore[attr-defined]
    assert not library.store.blobs.exists(digest)


def test_an_archive_unpacking_past_the_limit_is_refused_unread(settings: Settings) -> None:
    limited = settings.model_copy(
        update={"ingest": settings.ingest.model_copy(update={"max_unpacked_bytes": 1_000_000})}
    )
    zeros = bytes(2_000_000)
    with TestClient(create_app(limited)) as client:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as bomb:
            bomb.writestr("manifest.json", "{}")
            bomb.writestr("originals/" + "0" * 64, zeros)
        assert len(out.getvalue()) < 10_000
        error = assert_error(import_(client, out.getvalue()), 413, code="file_too_large")
        assert "CITEWELL_INGEST__MAX_UNPACKED_BYTES" in error["message"]
        assert client.get("/v1/buckets").json()["data"] == []


def test_an_archive_upload_over_the_limit_is_refused_as_it_streams_in(settings: Settings) -> None:
    limited = settings.model_copy(
        update={"ingest": settings.ingest.model_copy(update={"max_unpacked_bytes": 1_000_000})}
    )
    with TestClient(create_app(limited)) as client:
        error = assert_error(import_(client, bytes(2_000_000)), 413, code="file_too_large")
        assert error["message"] == "The archive is larger than the limit of 1000000 bytes."
        assert client.get("/v1/buckets").json()["data"] == []
