"""Originals by their SHA-256, and the Files APIs' uploads, on either object store: the data
folder or an S3 bucket (moto's server, on this machine); and a store whose originals are in the
bucket keeps an original exactly as long as a source holds it."""

from __future__ import annotations

from pathlib import Path

import pytest

from citewell.config import BlobSettings
from citewell.errors import NotFound
from citewell.store.objects import FolderObjects, ObjectStore
from citewell.store.objects.blobs import BlobStore, content_hash
from citewell.store.objects.s3 import S3Objects
from citewell.uploads import FileStore
from tests.store.conftest import Backend
from tests.store.test_forgetting import add

ORIGINAL = b"%PDF-1.7 not really"


@pytest.fixture(params=["folder", "s3"])
def objects(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "folder":
        return FolderObjects(tmp_path / "blobs")
    return S3Objects(request.getfixturevalue("s3_blobs"), "blobs")


def test_an_original_is_kept_under_its_digest_once(objects: ObjectStore) -> None:
    blobs, digest = BlobStore(objects), content_hash(ORIGINAL)
    blobs.put(ORIGINAL, digest)
    blobs.put(ORIGINAL, digest)
    assert (blobs.get(digest), blobs.exists(digest)) == (ORIGINAL, True)
    assert objects.names(digest[:2]) == [f"{digest[:2]}/{digest}"]


def test_a_missing_original_is_not_found_on_either_store(objects: ObjectStore) -> None:
    blobs, digest = BlobStore(objects), content_hash(ORIGINAL)
    blobs.put(ORIGINAL, digest)
    blobs.delete(digest)
    with pytest.raises(NotFound, match=f"original file {digest} is missing from the blob store"):
        blobs.get(digest)
    assert not blobs.exists(digest)


@pytest.mark.parametrize("digest", ["ab", "../" + "a" * 61, "A" * 64])
def test_a_digest_that_is_no_sha256_is_refused(objects: ObjectStore, digest: str) -> None:
    with pytest.raises(ValueError, match="not a SHA-256 digest"):
        BlobStore(objects).put(ORIGINAL, digest)


def test_uploaded_files_are_kept_per_tenant_newest_first(objects: ObjectStore) -> None:
    files = FileStore(objects)
    older = files.put(b"one", filename="a.txt", mime_type="text/plain", tenant_id="t1")
    newer = files.put(b"two", filename="b.pdf", mime_type="application/pdf", tenant_id="t1")
    files.put(b"three", filename="c.txt", mime_type="text/plain", tenant_id="t2")
    files.put_vector_store_metadata("bkt_1", {"name": "Docs"}, tenant_id="t1")
    # Stamped to the second: files made within one second come by id.
    expected = sorted([older, newer], key=lambda f: (f.created_at, f.id), reverse=True)
    assert files.list(tenant_id="t1") == expected
    assert files.get(older.id, tenant_id="t1") == older
    assert files.content(newer.id, tenant_id="t1") == b"two"
    assert files.vector_store_metadata("bkt_1", tenant_id="t1") == {"name": "Docs"}
    with pytest.raises(NotFound, match=f"File not found: {older.id}"):
        files.content(older.id, tenant_id="t2")
    files.delete(older.id, tenant_id="t1")
    files.delete_vector_store_metadata("bkt_1", tenant_id="t1")
    assert [f.id for f in files.list(tenant_id="t1")] == [newer.id]
    assert files.vector_store_metadata("bkt_1", tenant_id="t1") == {}
    with pytest.raises(NotFound):
        files.get(older.id, tenant_id="t1")


def test_an_original_in_a_bucket_outlives_one_of_two_sources_holding_it(
    backend: Backend, s3_blobs: BlobSettings
) -> None:
    blobs = BlobStore(S3Objects(s3_blobs, "blobs"))
    store = backend.open(blobs=blobs)
    bucket = store.create_bucket("handbook", tenant_id="default").id
    other = store.create_bucket("other", tenant_id="default").id
    first, _ = add(store, bucket, "a.txt", "Refunds take thirty days.")
    second, _ = add(store, other, "b.txt", "Refunds take thirty days.")
    assert first.content_hash == second.content_hash
    assert not (backend.folder / "blobs").exists()
    store.delete_source(first.id)
    assert store.original(second.id) == b"Refunds take thirty days."
    store.delete_bucket(other)
    assert not blobs.exists(first.content_hash)
