"""Tenants and API keys over HTTP: ``/v1/tenants`` (the operator's) and ``/v1/keys``.

A key is created with the permissions it grants, and optionally the buckets it is restricted to
and the ACL labels it holds; its ``secret`` (the token to send) is in the creation response
only. A key may create keys in its own tenant that allow no more than itself; the operator's
key, or the local user of an open server, in any tenant. ``DELETE`` revokes: the key stays
listed with its ``revoked_at``, and every request or signed link made with it fails from then.
"""

from __future__ import annotations

from fastapi import APIRouter, status
from pydantic import Field

from citewell.api.deps import KeyRingDep, LibraryDep, Managing
from citewell.library import Library
from citewell.model import Permission, Principal
from citewell.render.records import KeyObject, ListObject, TenantObject, WireModel

__all__ = ["KeyObject", "TenantObject", "router"]

router = APIRouter(tags=["keys"])


class TenantCreate(WireModel):
    name: str = Field(min_length=1, max_length=200)


class KeyCreate(WireModel):
    permissions: list[Permission] = Field(min_length=1, description="What the key may do.")
    name: str = Field(default="", max_length=200)
    bucket_ids: list[str] | None = Field(
        default=None, max_length=1000, description="Bucket ids or slugs; null: every bucket."
    )
    acl_labels: list[str] | None = Field(
        default=None, max_length=1000, description="Null: the key sees every source."
    )
    tenant_id: str | None = Field(
        default=None, description="The operator only: another tenant than the caller's."
    )


@router.post("/v1/tenants", status_code=status.HTTP_201_CREATED)
def create_tenant(body: TenantCreate, keys: KeyRingDep, principal: Managing) -> TenantObject:
    return TenantObject.render(keys.create_tenant(body.name, by=principal))


@router.get("/v1/tenants")
def list_tenants(keys: KeyRingDep, principal: Managing) -> ListObject[TenantObject]:
    return ListObject[TenantObject].of([TenantObject.render(t) for t in keys.tenants(by=principal)])


@router.post("/v1/keys", status_code=status.HTTP_201_CREATED)
def create_key(
    body: KeyCreate, keys: KeyRingDep, library: LibraryDep, principal: Managing
) -> KeyObject:
    """A new key; its ``secret`` is shown in this response only."""
    tenant_id = body.tenant_id or principal.tenant_id
    key, secret = keys.create(
        tenant_id=tenant_id,
        permissions=body.permissions,
        by=principal,
        name=body.name,
        bucket_ids=_bucket_ids(library, tenant_id, body.bucket_ids),
        acl_labels=body.acl_labels,
    )
    return KeyObject.render(key, secret)


@router.get("/v1/keys")
def list_keys(
    keys: KeyRingDep, principal: Managing, tenant_id: str | None = None
) -> ListObject[KeyObject]:
    """The keys of the caller's tenant (the operator: of ``tenant_id``), revoked ones too."""
    found = keys.keys(tenant_id or principal.tenant_id, by=principal)
    return ListObject[KeyObject].of([KeyObject.render(k) for k in found])


@router.get("/v1/keys/{key_id}")
def get_key(key_id: str, keys: KeyRingDep, principal: Managing) -> KeyObject:
    return KeyObject.render(keys.key(key_id, by=principal))


@router.delete("/v1/keys/{key_id}")
def revoke_key(key_id: str, keys: KeyRingDep, principal: Managing) -> KeyObject:
    """Revoke a key (again: no change). It stays listed, with ``revoked_at``."""
    return KeyObject.render(keys.revoke(key_id, by=principal))


def _bucket_ids(library: Library, tenant_id: str, given: list[str] | None) -> list[str] | None:
    """Bucket ids or slugs of the key's tenant, as ids."""
    if given is None:
        return None
    owner = Principal(tenant_id=tenant_id, sees_all_labels=True)
    return [library.get_bucket(bucket, principal=owner).id for bucket in given]
