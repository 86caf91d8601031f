"""Objects in an S3-compatible bucket (AWS S3, MinIO, Ceph, R2, …), through boto3.

An area's objects are kept under ``<prefix>/<area>/`` of the bucket named by ``blobs.url``
(``s3://bucket/prefix``). Every object is written by one ``PutObject``, which S3 applies whole
or not at all: no upload is ever left half done, so there is nothing to sweep.

Credentials and the region come from the settings when given, else from boto3's usual chain
(``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ``~/.aws``, an instance role).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from citewell.config import BlobSettings
from citewell.errors import ConfigError, StoreError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = ["S3Objects"]

_MISSING = {"NoSuchKey", "404", "NotFound"}


class S3Objects:
    """One area (``blobs``, ``files``) of the bucket that ``settings.url`` names."""

    def __init__(self, settings: BlobSettings, area: str) -> None:
        try:
            import boto3
            from botocore.config import Config
        except ImportError as exc:
            raise ConfigError(
                f"CITEWELL_BLOBS__URL names an S3 bucket but S3 support is not installed ({exc}):"
                " pip install 'citewell[s3]'"
            ) from exc
        assert settings.url is not None
        self.bucket, _, prefix = settings.url.removeprefix("s3://").partition("/")
        self.prefix = "/".join(part for part in (*prefix.split("/"), area) if part) + "/"
        key_id, secret = settings.access_key_id, settings.secret_access_key
        self._client: S3Client = boto3.session.Session().client(
            "s3",
            endpoint_url=settings.endpoint_url,
            region_name=settings.region,
            aws_access_key_id=None if key_id is None else key_id.get_secret_value(),
            aws_secret_access_key=None if secret is None else secret.get_secret_value(),
            config=Config(s3={"addressing_style": settings.addressing_style}),
        )
        try:
            self._client.head_bucket(Bucket=self.bucket)
        except Exception as exc:  # botocore's errors (refused, unknown bucket, no credentials)
            raise ConfigError(f"cannot reach the S3 bucket {self.bucket!r}: {exc}") from exc

    def put(self, name: str, data: bytes) -> None:
        with _s3_errors():
            self._client.put_object(Bucket=self.bucket, Key=self.prefix + name, Body=data)

    def get(self, name: str) -> bytes:
        with _s3_errors(name):
            response = self._client.get_object(Bucket=self.bucket, Key=self.prefix + name)
            return response["Body"].read()

    def exists(self, name: str) -> bool:
        try:
            with _s3_errors(name):
                self._client.head_object(Bucket=self.bucket, Key=self.prefix + name)
        except FileNotFoundError:
            return False
        return True

    def delete(self, name: str) -> None:
        with _s3_errors():
            self._client.delete_object(Bucket=self.bucket, Key=self.prefix + name)

    def names(self, folder: str) -> list[str]:
        names: list[str] = []
        with _s3_errors():
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=f"{self.prefix}{folder.rstrip('/')}/"
            )
            for page in pages:
                names.extend(item["Key"][len(self.prefix) :] for item in page.get("Contents", []))
        return names

    def sweep_temporary(self) -> None:
        """Nothing to do: a ``PutObject`` that fails leaves nothing behind."""


@contextmanager
def _s3_errors(name: str | None = None) -> Iterator[None]:
    """The one place where botocore's exceptions become citewell's: a missing object (when
    ``name`` is one that may be missing) is ``FileNotFoundError``, like a missing file."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as exc:
        if name is not None and exc.response.get("Error", {}).get("Code") in _MISSING:
            raise FileNotFoundError(name) from None
        raise StoreError(f"the S3 bucket failed: {exc}") from exc
    except BotoCoreError as exc:
        raise StoreError(f"the S3 bucket failed: {exc}") from exc
