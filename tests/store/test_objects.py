"""Object stores: a folder of the data folder, and an S3 bucket (moto's server, on this
machine), answer alike; then what each does that the other cannot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
from pydantic import SecretStr

from citewell.config import BlobSettings, Settings
from citewell.errors import ConfigError, StoreError
from citewell.store.objects import FolderObjects, ObjectStore, open_objects
from citewell.store.objects.s3 import S3Objects
from tests.conftest import s3_client_options


@pytest.fixture(params=["folder", "s3"])
def objects(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    if request.param == "folder":
        return FolderObjects(tmp_path / "blobs")
    return S3Objects(request.getfixturevalue("s3_blobs"), "blobs")


def test_an_object_reads_back_as_written_and_a_write_replaces_it(objects: ObjectStore) -> None:
    objects.put("ab/first", b"one")
    objects.put("ab/second", b"")
    assert (objects.get("ab/first"), objects.get("ab/second")) == (b"one", b"")
    objects.put("ab/first", b"two")
    assert objects.get("ab/first") == b"two"


def test_a_missing_object_is_file_not_found(objects: ObjectStore) -> None:
    with pytest.raises(FileNotFoundError):
        objects.get("ab/missing")
    assert not objects.exists("ab/missing")


def test_a_deleted_object_is_gone_and_deleting_twice_is_harmless(objects: ObjectStore) -> None:
    objects.put("ab/kept", b"kept")
    objects.put("ab/gone", b"gone")
    assert objects.exists("ab/gone")
    objects.delete("ab/gone")
    objects.delete("ab/gone")
    assert (objects.exists("ab/gone"), objects.get("ab/kept")) == (False, b"kept")


def test_names_are_those_under_the_folder_at_any_depth(objects: ObjectStore) -> None:
    for name in ("t1/file_a.json", "t1/file_a.bin", "t1/stores/b.json", "t10/c.json", "t2/d"):
        objects.put(name, b"x")
    assert sorted(objects.names("t1")) == ["t1/file_a.bin", "t1/file_a.json", "t1/stores/b.json"]
    assert objects.names("t3") == []


def test_sweeping_keeps_every_object(objects: ObjectStore) -> None:
    objects.put("ab/kept", b"kept")
    objects.sweep_temporary()
    assert objects.get("ab/kept") == b"kept"


def test_a_folder_sweeps_what_a_writer_that_died_left(tmp_path: Path) -> None:
    objects = FolderObjects(tmp_path)
    objects.put("ab/kept", b"kept")
    (tmp_path / "ab" / ".tmp-half").write_bytes(b"ha")
    assert objects.names("ab") == ["ab/kept"]
    objects.sweep_temporary()
    assert sorted(p.name for p in (tmp_path / "ab").iterdir()) == ["kept"]


@pytest.mark.parametrize("name", ["../escape", "ab/../../escape", "/abs", "ab//c", "ab/.tmp-x"])
def test_a_folder_refuses_a_name_that_leaves_it_or_hides(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="not an object name"):
        FolderObjects(tmp_path / "blobs").put(name, b"x")


def test_an_area_of_a_bucket_is_its_prefix_then_the_area(s3_blobs: BlobSettings) -> None:
    S3Objects(s3_blobs, "blobs").put("ab/abc", b"x")
    S3Objects(s3_blobs, "files").put("t1/file_a.bin", b"y")
    bucket = s3_blobs.url.removeprefix("s3://").split("/")[0]  # type: ignore[union-attr]
    listed = boto3.client(**s3_client_options(s3_blobs)).list_objects_v2(Bucket=bucket)
    assert [item["Key"] for item in listed["Contents"]] == [
        "library/blobs/ab/abc",
        "library/files/t1/file_a.bin",
    ]
    unprefixed = s3_blobs.model_copy(update={"url": f"s3://{bucket}"})
    assert S3Objects(unprefixed, "blobs").prefix == "blobs/"


def test_the_settings_choose_the_data_folder_unless_they_name_a_bucket(
    tmp_path: Path, s3_blobs: BlobSettings
) -> None:
    on_disk = open_objects(Settings(data_dir=tmp_path), "files")
    assert isinstance(on_disk, FolderObjects) and on_disk.root == tmp_path / "files"
    in_bucket = open_objects(Settings(data_dir=tmp_path, blobs=s3_blobs), "files")
    assert isinstance(in_bucket, S3Objects) and in_bucket.prefix == "library/files/"
    assert not (tmp_path / "blobs").exists()


def test_a_bucket_that_cannot_be_reached_is_a_configuration_error(
    s3_blobs: BlobSettings,
) -> None:
    missing = s3_blobs.model_copy(update={"url": "s3://no-such-bucket/library"})
    with pytest.raises(ConfigError, match="cannot reach the S3 bucket 'no-such-bucket'"):
        S3Objects(missing, "blobs")


def test_a_bucket_that_fails_later_is_a_store_error(s3_blobs: BlobSettings) -> None:
    objects = S3Objects(s3_blobs, "blobs")
    client: Any = boto3.client(**s3_client_options(s3_blobs))
    client.delete_bucket(Bucket=objects.bucket)
    with pytest.raises(StoreError, match="the S3 bucket failed"):
        objects.put("ab/abc", b"x")
    with pytest.raises(StoreError, match="NoSuchBucket"):
        objects.get("ab/abc")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"url": "https://bucket/prefix"}, "String should match pattern"),
        ({"url": "s3://Bucket"}, "String should match pattern"),
        ({"url": "s3://bucket", "access_key_id": SecretStr("k")}, "set both"),
    ],
)
def test_blob_settings_refuse_a_url_that_is_no_bucket_and_half_a_key(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        BlobSettings(**changes)
