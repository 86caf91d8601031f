"""What the library refuses, and how it cleans what clients send: bucket slugs, filenames,
metadata, ACL labels, and who may create buckets."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath, PureWindowsPath

from citewell.errors import InvalidRequest, NotFound, PermissionDenied
from citewell.model import MetadataValue, Principal
from citewell.scalar_text import has_surrogates

__all__ = [
    "check_slug",
    "clean_filename",
    "clean_metadata",
    "may_create_buckets",
    "may_label",
    "no_source",
]

_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_MAX_METADATA_KEYS = 32
_MAX_METADATA_TEXT = 1024


def no_source(source_id: str) -> NotFound:
    """The one answer for a source that does not exist and for one the caller may not see."""
    return NotFound(f"no source '{source_id}'", param="source_id")


def may_label(acl: frozenset[str], principal: Principal) -> None:
    """A caller labels a source only so that it still sees it: it never makes what it cannot
    read, replace or delete again."""
    if has_surrogates(acl):
        raise InvalidRequest("ACL labels must be valid Unicode text", param="acl")
    if not principal.can_see(acl):
        raise PermissionDenied(
            "A key limited to ACL labels may only store a source it can see: give it no labels,"
            " or at least one of the key's.",
            param="acl",
        )


def may_create_buckets(principal: Principal) -> None:
    if principal.bucket_ids is not None:
        # Its new bucket would be outside the buckets it is restricted to.
        raise PermissionDenied("A key restricted to buckets cannot create buckets.")


def check_slug(slug: str) -> None:
    if not _SLUG.match(slug):
        raise InvalidRequest(
            f"bucket slug {slug!r} must be 1-63 lowercase letters, digits, '-' or '_',"
            " starting with a letter or digit",
            param="slug",
        )


def clean_filename(filename: str) -> str:
    """The last path component, without control characters: names come from clients."""
    name = PureWindowsPath(PurePosixPath(filename).name).name
    name = "".join(ch for ch in name if ch.isprintable()).strip()
    if not name or name in (".", ".."):
        raise InvalidRequest(f"invalid filename {filename!r}", param="filename")
    return name[:255]


def clean_metadata(metadata: Mapping[str, MetadataValue]) -> dict[str, MetadataValue]:
    if has_surrogates(metadata):
        raise InvalidRequest("metadata must be valid Unicode text", param="metadata")
    if len(metadata) > _MAX_METADATA_KEYS:
        raise InvalidRequest(f"at most {_MAX_METADATA_KEYS} metadata keys", param="metadata")
    clean: dict[str, MetadataValue] = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not key or len(key) > 64:
            raise InvalidRequest(f"metadata key {key!r} must be 1-64 characters", param="metadata")
        if not isinstance(value, str | int | float | bool):
            raise InvalidRequest(
                f"metadata value of {key!r} must be a string, number or boolean", param="metadata"
            )
        if isinstance(value, str) and len(value) > _MAX_METADATA_TEXT:
            raise InvalidRequest(f"metadata value of {key!r} is too long", param="metadata")
        clean[key] = value
    return clean
