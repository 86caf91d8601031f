"""Signed access links: a URL that opens one thing of one source for a short while, without a key.

    signer = LinkSigner.open(settings.links, settings.data_dir)
    made = signer.grant(principal, Permission.ASK, source.id, expires_at=signer.expiry())
    token = signer.sign(made)
    link = signer.verify(token)             # -> made; LinkRefused if tampered with or expired
    principal = holder(link, keys)          # -> who opens it now; LinkRefused if no longer allowed

A token is ``<payload>.<signature>``: the payload is the ``Link`` as compact JSON, base64url
without padding; the signature is the HMAC-SHA256 of the payload's text under the server's link
secret, base64url without padding. The payload is readable by whoever holds the link (it names
the tenant, the key's id, the source's id and the expiry, nothing secret); only the server can
make one.

A link is bound to the key it was made for: when it is opened, the key is read as it stands now,
so a link dies with its key's revocation, with the permission it was made under, and with the
key's view of the source (tenant, bucket restriction, ACL labels: ``Library.get_source``).
A link ``kind`` names what it opens: ``original`` (the file as uploaded), ``page`` (a picture of
the page numbered ``page``) or ``highlight`` (that picture with the boxes of the text range
``span`` tinted on it; ``citewell.imaging``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from citewell.access import KeyRing
from citewell.config import MIN_LINK_SECRET, LinkSettings
from citewell.errors import ConfigError, PermissionDenied
from citewell.model import Permission, Principal, Span

__all__ = [
    "SECRET_FILE",
    "Link",
    "LinkKind",
    "LinkRefused",
    "LinkSigner",
    "Refusal",
    "holder",
]

SECRET_FILE = "link-secret"
"""File in the data folder holding the generated link secret (when none is configured)."""


class LinkKind(StrEnum):
    """What a link opens."""

    ORIGINAL = "original"
    """The source's original file, as uploaded."""
    PAGE = "page"
    """A picture of one page (``Link.page``)."""
    HIGHLIGHT = "highlight"
    """A picture of one page with the boxes of a range of the text on it tinted (``Link.span``)."""


class Link(BaseModel):
    """What a token grants: one thing of one source, to one key, until a moment."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant_id: str = Field(description="The tenant of the key the link was made for.")
    key_id: str | None = Field(
        default=None,
        description="The key the link was made for; None for the local user of an open server, "
        "'admin' for the operator.",
    )
    permission: Permission = Field(description="The permission the link was made under.")
    source_id: str = Field(description="The source version the link opens.")
    kind: LinkKind = Field(default=LinkKind.ORIGINAL, description="What of the source it opens.")
    page: int | None = Field(default=None, ge=1, description="The 1-based page, for page kinds.")
    span: Span | None = Field(
        default=None, description="The range of the canonical text shown, for region kinds."
    )
    expires_at: int = Field(description="When the link stops opening, in Unix seconds.")

    @model_validator(mode="after")
    def _names_what_its_kind_needs(self) -> Self:
        if (self.page is not None) != (self.kind is not LinkKind.ORIGINAL):
            raise ValueError(f"a link of kind {self.kind} names a page only if it shows one")
        if (self.span is not None) != (self.kind is LinkKind.HIGHLIGHT):
            raise ValueError(f"a link of kind {self.kind} names a span only if it highlights one")
        return self


class Refusal(StrEnum):
    """Why a link does not open; each value is the error ``code`` the API answers with."""

    INVALID = "link_invalid"
    """Not a token this server made: malformed, or changed since it was signed."""
    EXPIRED = "link_expired"
    KEY_REVOKED = "key_revoked"
    """The key it was made for is revoked or gone (or the server's access mode changed)."""
    PERMISSION = "permission_denied"
    """The key no longer holds the permission, or is not of the link's tenant."""


class LinkRefused(PermissionDenied):
    """A link that does not open (a source it names that is gone is ``NotFound`` instead)."""

    def __init__(self, reason: Refusal, message: str) -> None:
        super().__init__(message, param="token")
        self.reason = reason


class LinkSigner:
    """Makes and checks tokens with one server secret. ``clock`` gives Unix seconds."""

    def __init__(self, secret: bytes, *, ttl: int, clock: Callable[[], float] = time.time) -> None:
        self._secret = secret
        self.ttl = ttl
        self._clock = clock

    @classmethod
    def open(cls, settings: LinkSettings, data_dir: Path) -> LinkSigner:
        """The signer of the configured secret, else of the one kept in the data folder (made
        on first use, so that links keep working across restarts)."""
        if settings.secret is not None:
            secret = settings.secret.get_secret_value().encode()
        else:
            secret = _kept_secret(data_dir / SECRET_FILE)
        return cls(secret, ttl=settings.ttl_seconds)

    def now(self) -> int:
        return int(self._clock())

    def expiry(self) -> int:
        """When a link made now expires: ``ttl`` seconds from now."""
        return self.now() + self.ttl

    def grant(
        self,
        principal: Principal,
        permission: Permission,
        source_id: str,
        *,
        expires_at: int,
        page: int | None = None,
        span: Span | None = None,
    ) -> Link:
        """A link for the caller, under the permission the caller used, to a source's original;
        with ``page``, to a picture of that page; with ``span`` too, highlighting that range."""
        if page is None:
            kind = LinkKind.ORIGINAL
        else:
            kind = LinkKind.PAGE if span is None else LinkKind.HIGHLIGHT
        return Link(
            tenant_id=principal.tenant_id,
            key_id=principal.key_id,
            permission=permission,
            source_id=source_id,
            kind=kind,
            page=page,
            span=span,
            expires_at=expires_at,
        )

    def sign(self, link: Link) -> str:
        payload = _encode(link.model_dump_json(exclude_none=True).encode())
        return f"{payload}.{self._signature(payload)}"

    def verify(self, token: str) -> Link:
        """The link a token carries. Raises ``LinkRefused`` (``INVALID``) for a token this server
        did not sign exactly so, and (``EXPIRED``) for one past its expiry."""
        payload, dot, signature = token.partition(".")
        # Compared as text: a base64 character can change without changing the decoded bytes.
        # As UTF-8 bytes, because compare_digest refuses non-ASCII text (a hostile token).
        if not dot or not hmac.compare_digest(
            self._signature(payload).encode(), signature.encode("utf-8", "surrogatepass")
        ):
            raise LinkRefused(Refusal.INVALID, "The link is not valid.")
        try:
            link = Link.model_validate_json(_decode(payload))
        except ValueError:  # pydantic's ValidationError and binascii's Error are ValueErrors
            # Signed by this server but unreadable: made by an incompatible version.
            raise LinkRefused(Refusal.INVALID, "The link is not valid.") from None
        if link.expires_at <= self.now():
            raise LinkRefused(Refusal.EXPIRED, "The link has expired; ask again for a new one.")
        return link

    def _signature(self, payload: str) -> str:
        message = payload.encode("utf-8", "surrogatepass")
        return _encode(hmac.new(self._secret, message, hashlib.sha256).digest())


def holder(link: Link, keys: KeyRing) -> Principal:
    """Who opens the link: the principal of its key as the key stands now. Raises
    ``LinkRefused`` when the key is revoked or gone, is of another tenant, or no longer holds
    the link's permission."""
    principal = keys.principal_now(link.key_id)
    if principal is None:
        raise LinkRefused(
            Refusal.KEY_REVOKED, "The API key this link was made for is no longer valid."
        )
    if principal.tenant_id != link.tenant_id:
        raise LinkRefused(Refusal.PERMISSION, "The link was made for another tenant.")
    if link.permission not in principal.permissions:
        raise LinkRefused(
            Refusal.PERMISSION,
            f"The API key this link was made for no longer has the '{link.permission}' permission.",
        )
    return principal


def _kept_secret(path: Path) -> bytes:
    """The secret in ``path``, made there (readable by this user only) if it is missing."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(secrets.token_hex(32))
        try:
            # A hard link appears whole or not at all: of two servers starting at once on one
            # folder, the first one's secret stands and the other reads it.
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    secret = path.read_bytes().strip()
    if len(secret) < MIN_LINK_SECRET:
        raise ConfigError(f"{path} holds no usable link secret: delete it to make a new one.")
    return secret


def _encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
