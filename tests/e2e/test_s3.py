"""Real ``citewell serve`` processes keeping originals and uploads in an S3-compatible bucket
(moto's server, on this machine), over real HTTP: an answer's page pictures and originals come
from the bucket, deleting sources empties it, and two replicas on one PostgreSQL database, each
with a data folder of its own, serve each other's files."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from PIL import Image

from citewell.config import BlobSettings
from citewell.store.objects.blobs import content_hash
from tests.conftest import s3_client_options
from tests.e2e.test_jobs import serving

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

QUESTION = "Who patented the typewriter in 1868?"
LINK_SECRET = "s" * 40
PNG = b"\x89PNG\r\n\x1a\n"


def blob_env(blobs: BlobSettings) -> dict[str, str]:
    """The settings of ``blobs`` as a server reads them from its environment."""
    assert blobs.url and blobs.endpoint_url and blobs.region
    assert blobs.access_key_id and blobs.secret_access_key
    return {
        "CITEWELL_BLOBS__URL": blobs.url,
        "CITEWELL_BLOBS__ENDPOINT_URL": blobs.endpoint_url,
        "CITEWELL_BLOBS__REGION": blobs.region,
        "CITEWELL_BLOBS__ADDRESSING_STYLE": blobs.addressing_style,
        "CITEWELL_BLOBS__ACCESS_KEY_ID": blobs.access_key_id.get_secret_value(),
        "CITEWELL_BLOBS__SECRET_ACCESS_KEY": blobs.secret_access_key.get_secret_value(),
        "CITEWELL_LINKS__SECRET": LINK_SECRET,
    }


def keys_in(blobs: BlobSettings) -> list[str]:
    """Every object in the bucket, looked up behind the servers' back."""
    bucket = blobs.url.removeprefix("s3://").split("/")[0]  # type: ignore[union-attr]
    listed = boto3.client(**s3_client_options(blobs)).list_objects_v2(Bucket=bucket)
    return sorted(item["Key"] for item in listed.get("Contents", []))


def upload(url: str, bucket: str, filename: str, data: bytes) -> dict[str, Any]:
    if httpx.get(f"{url}/v1/buckets/{bucket}", timeout=60).status_code == 404:
        assert httpx.post(f"{url}/v1/buckets", json={"slug": bucket}, timeout=60).is_success
    response = httpx.post(
        f"{url}/v1/buckets/{bucket}/sources", files={"file": (filename, data)}, timeout=120
    )
    assert response.status_code == 201, response.text
    source: dict[str, Any] = response.json()["source"]
    return source


def ask(url: str) -> dict[str, Any]:
    response = httpx.post(
        f"{url}/v1/responses",
        json={
            "input": QUESTION,
            "tools": [{"type": "file_search", "vector_store_ids": ["essays"]}],
            "include": ["file_search_call.results"],
        },
        timeout=120,
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.fixture
def pdf(documents: Path) -> bytes:
    return (documents / "pdf_text" / "multi_page.pdf").read_bytes()


@pytest.fixture
def server(tmp_path: Path, s3_blobs: BlobSettings) -> Iterator[str]:
    with serving(tmp_path / "data", tmp_path / "server.log", blob_env(s3_blobs)) as (url, _):
        yield url


def test_an_answer_over_a_pdf_kept_in_a_bucket_opens_its_page_and_original(
    server: str, tmp_path: Path, s3_blobs: BlobSettings, pdf: bytes
) -> None:
    source = upload(server, "essays", "multi_page.pdf", pdf)
    digest = content_hash(pdf)
    assert source["content_hash"] == digest
    assert keys_in(s3_blobs) == [f"library/blobs/{digest[:2]}/{digest}"]

    answer = ask(server)
    [call] = [item for item in answer["output"] if item["type"] == "file_search_call"]
    original = httpx.get(call["results"][0]["attributes"]["access_url"], timeout=60)
    assert (original.status_code, original.content) == (200, pdf)
    [citation, *_] = answer["output"][-1]["content"][0]["annotations"]
    assert citation["file_id"] == source["id"]
    [region] = citation["regions"]
    page = httpx.get(region["highlight_url"], params={"width": 400}, timeout=60)
    assert (page.status_code, page.headers["content-type"]) == (200, "image/png")
    assert page.content.startswith(PNG)
    assert Image.open(io.BytesIO(page.content)).width == 400

    # Nothing of the library's files is in the data folder.
    assert not (tmp_path / "data" / "blobs").exists()
    assert not (tmp_path / "data" / "files").exists()


def test_deleting_sources_deletes_their_original_once_no_source_holds_it(
    server: str, s3_blobs: BlobSettings, pdf: bytes
) -> None:
    first = upload(server, "essays", "multi_page.pdf", pdf)
    second = upload(server, "copies", "same.pdf", pdf)
    note = upload(server, "copies", "note.txt", b"The workshop closes at six on Fridays.")
    blob = f"library/blobs/{first['content_hash'][:2]}/{first['content_hash']}"
    assert second["content_hash"] == first["content_hash"]
    assert len(keys_in(s3_blobs)) == 2  # the PDF once, and the note

    assert httpx.delete(f"{server}/v1/sources/{first['id']}", timeout=60).is_success
    assert blob in keys_in(s3_blobs)
    content = httpx.get(f"{server}/v1/sources/{second['id']}/content", timeout=60)
    assert content.content == pdf

    assert httpx.delete(f"{server}/v1/sources/{second['id']}", timeout=60).is_success
    note_blob = f"library/blobs/{note['content_hash'][:2]}/{note['content_hash']}"
    assert keys_in(s3_blobs) == [note_blob]
    assert httpx.delete(f"{server}/v1/buckets/copies", timeout=60).is_success
    assert keys_in(s3_blobs) == []


@pytest.mark.integration
def test_two_replicas_without_a_shared_folder_serve_each_others_files(
    tmp_path: Path, s3_blobs: BlobSettings, database_url: str, pdf: bytes
) -> None:
    env = {**blob_env(s3_blobs), "CITEWELL_DATABASE_URL": database_url}
    with ExitStack() as stack:
        a, _ = stack.enter_context(serving(tmp_path / "a", tmp_path / "a.log", env))
        b, _ = stack.enter_context(serving(tmp_path / "b", tmp_path / "b.log", env))
        source = upload(a, "essays", "multi_page.pdf", pdf)
        uploaded = httpx.post(
            f"{a}/v1/files",
            files={"file": ("notes.txt", b"Kept in the bucket.")},
            data={"purpose": "assistants"},
            timeout=60,
        ).json()

        # A link made by one replica opens the original through the other.
        answer = ask(b)
        [call] = [item for item in answer["output"] if item["type"] == "file_search_call"]
        link = call["results"][0]["attributes"]["access_url"]
        assert link.startswith(f"{b}/v1/links/")
        through_a = httpx.get(link.replace(b, a), timeout=60)
        assert (through_a.status_code, through_a.content) == (200, pdf)
        content = httpx.get(f"{b}/v1/files/{uploaded['id']}/content", timeout=60)
        assert (content.status_code, content.content) == (200, b"Kept in the bucket.")
        assert [f["id"] for f in httpx.get(f"{b}/v1/files", timeout=60).json()["data"]] == [
            uploaded["id"]
        ]

        exported = httpx.get(f"{a}/v1/buckets/essays/export", timeout=60)
        with zipfile.ZipFile(io.BytesIO(exported.content)) as archive:
            assert archive.read(f"originals/{source['content_hash']}") == pdf

        assert httpx.delete(f"{b}/v1/sources/{source['id']}", timeout=60).is_success
        assert httpx.delete(f"{b}/v1/files/{uploaded['id']}", timeout=60).is_success
        assert keys_in(s3_blobs) == []
    # With the link secret set, neither replica left a thing in its data folder.
    assert files_in(tmp_path / "a") == files_in(tmp_path / "b") == []


def files_in(folder: Path) -> list[Path]:
    return list(folder.rglob("*")) if folder.exists() else []
