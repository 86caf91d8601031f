"""Who is calling: API keys, and the principal each one stands for.

    keys = KeyRing(store, admin_key=settings.admin_key)
    key, token = keys.create(tenant_id="default", permissions={Permission.ASK}, by=operator)
    keys.principal(token)          # -> Principal of that key; Unauthenticated if not valid

A token is ``cwk_<hex id>_<secret>``: ``key_<hex id>`` is the stored key's id (safe to show and
to log), the secret is 32 random bytes of which only the SHA-256 is kept, so a token is shown
once, when it is made. The operator's key (``CITEWELL_ADMIN_KEY``) stands for the owner of the
default tenant who may also create tenants and keys in any of them. Without an operator key the
server is a single open tenant on this machine: a request without a citewell token is the local
user (the SDKs insist on sending some key, so any string that is not a citewell token counts as
none), while a citewell token, when presented, is still checked and limits the caller to it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable

from pydantic import SecretStr

from citewell.errors import NotFound, PermissionDenied, Unauthenticated
from citewell.model import ApiKey, Permission, Principal, Tenant
from citewell.store.base import AccessStore

__all__ = ["ADMIN_KEY_ID", "KeyRing", "may_administer"]

ADMIN_KEY_ID = "admin"
"""``Principal.key_id`` of the operator's key."""

_OPERATOR = Principal(sees_all_labels=True, key_id=ADMIN_KEY_ID)
"""The operator: the owner of the default tenant, who may also administer every tenant."""
_TOKEN = re.compile(r"cwk_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
_TOKEN_PREFIX = "cwk_"


def _same(presented: str, expected: str) -> bool:
    """Constant-time equality of two texts. As UTF-8 bytes: ``compare_digest`` raises on
    non-ASCII text, and a header may carry any Latin-1 character."""
    return hmac.compare_digest(presented.encode(), expected.encode())


def may_administer(principal: Principal) -> bool:
    """Whether the caller may create tenants and keys in any tenant: the operator's key, or the
    local user of an open server."""
    return principal.key_id in (None, ADMIN_KEY_ID)


class KeyRing:
    def __init__(self, store: AccessStore, *, admin_key: SecretStr | None) -> None:
        self._store = store
        self._admin_key = admin_key.get_secret_value() if admin_key else None

    @property
    def open(self) -> bool:
        """Whether requests without a key are served (no operator key is configured)."""
        return self._admin_key is None

    def principal(self, token: str | None) -> Principal:
        """Who presents ``token`` (None: no key at all)."""
        if token and self._admin_key and _same(token, self._admin_key):
            return _OPERATOR
        if token and token.startswith(_TOKEN_PREFIX):
            return Principal.of_key(self._verified(token))
        if self.open:
            return Principal.local()
        if not token:
            raise Unauthenticated(
                "You didn't provide an API key. Send it as 'Authorization: Bearer <key>' "
                "or in an 'x-api-key' header."
            )
        raise Unauthenticated("Incorrect API key provided.")

    def create(
        self,
        *,
        tenant_id: str,
        permissions: Iterable[Permission],
        by: Principal,
        name: str = "",
        bucket_ids: Iterable[str] | None = None,
        acl_labels: Iterable[str] | None = None,
    ) -> tuple[ApiKey, str]:
        """A new key and its token (shown once). A key never allows more than the key that
        makes it: no other tenant, permission, bucket or ACL label."""
        self._check_grant(by, tenant_id, set(permissions), bucket_ids, acl_labels)
        key = ApiKey(
            id=f"key_{secrets.token_hex(8)}",
            tenant_id=tenant_id,
            name=name,
            permissions=frozenset(permissions),
            bucket_ids=None if bucket_ids is None else frozenset(bucket_ids),
            acl_labels=None if acl_labels is None else frozenset(acl_labels),
            created_at=dt.datetime.now(dt.UTC),
        )
        secret = secrets.token_urlsafe(32)
        self._store.put_key(key, _hash(secret))
        return key, f"{_TOKEN_PREFIX}{key.id.removeprefix('key_')}_{secret}"

    def create_tenant(self, name: str, *, by: Principal) -> Tenant:
        if not may_administer(by):
            raise PermissionDenied("Only the operator's key may create tenants.")
        return self._store.create_tenant(name)

    def tenants(self, *, by: Principal) -> list[Tenant]:
        if not may_administer(by):
            raise PermissionDenied("Only the operator's key may list tenants.")
        return self._store.list_tenants()

    def keys(self, tenant_id: str, *, by: Principal) -> list[ApiKey]:
        """The tenant's keys, revoked ones too: a key sees its own tenant's, the operator any."""
        if tenant_id != by.tenant_id and not may_administer(by):
            raise PermissionDenied("A key can only see the keys of its own tenant.")
        return self._store.list_keys(tenant_id)

    def key(self, key_id: str, *, by: Principal) -> ApiKey:
        """A key of the caller's tenant (any tenant's for the operator); others' are not found."""
        try:
            key, _ = self._store.get_key(key_id)
        except NotFound:
            key = None
        if key is None or (key.tenant_id != by.tenant_id and not may_administer(by)):
            raise NotFound(f"No API key found with id '{key_id}'.", param="key_id")
        return key

    def revoke(self, key_id: str, *, by: Principal) -> ApiKey:
        """Revoke a key the caller sees (again: no change); it stays listed, with ``revoked_at``."""
        key = self.key(key_id, by=by)
        return self._store.revoke_key(key.id, tenant_id=key.tenant_id)

    def principal_now(self, key_id: str | None) -> Principal | None:
        """Who a key id stands for now (None for the local user): what a signed link made with
        it is checked against when it is opened. None when the key is revoked or unknown, for
        the local user once an operator key is set, and for the operator once it is not."""
        if key_id is None:
            return Principal.local() if self.open else None
        if key_id == ADMIN_KEY_ID:
            return None if self.open else _OPERATOR
        try:
            key, _ = self._store.get_key(key_id)
        except NotFound:
            return None
        return None if key.revoked_at else Principal.of_key(key)

    def _verified(self, token: str) -> ApiKey:
        match = _TOKEN.fullmatch(token)
        if match is None:
            raise Unauthenticated("Incorrect API key provided.")
        try:
            key, secret_hash = self._store.get_key(f"key_{match.group(1)}")
        except NotFound:
            raise Unauthenticated("Incorrect API key provided.") from None
        if not hmac.compare_digest(secret_hash, _hash(match.group(2))):
            raise Unauthenticated("Incorrect API key provided.")
        if key.revoked_at is not None:
            raise Unauthenticated(f"The API key {key.id} has been revoked.")
        return key

    def _check_grant(
        self,
        by: Principal,
        tenant_id: str,
        permissions: set[Permission],
        bucket_ids: Iterable[str] | None,
        acl_labels: Iterable[str] | None,
    ) -> None:
        if Permission.MANAGE not in by.permissions:
            raise PermissionDenied("Creating keys needs the 'manage' permission.")
        if tenant_id != by.tenant_id and not may_administer(by):
            raise PermissionDenied("A key can only create keys in its own tenant.")
        self._store.get_tenant(tenant_id)
        if not permissions:
            raise PermissionDenied("A key needs at least one permission.")
        if extra := permissions - by.permissions:
            names = ", ".join(sorted(extra))
            raise PermissionDenied(f"A key cannot grant permissions it lacks: {names}.")
        if by.bucket_ids is not None and (
            bucket_ids is None or not set(bucket_ids) <= by.bucket_ids
        ):
            raise PermissionDenied("A key restricted to buckets can only grant those buckets.")
        if not by.sees_all_labels and (acl_labels is None or not set(acl_labels) <= by.acl_labels):
            raise PermissionDenied("A key limited to ACL labels can only grant those labels.")


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()
