"""Tenants and API keys: who may reach which buckets, with which permissions."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from citewell.cli.common import echo_json, echo_records, json_option, main, with_library
from citewell.model import ApiKey, Permission, Principal, Tenant

if TYPE_CHECKING:
    from citewell.library import Library


@main.group()
def tenants() -> None:
    """Create and list tenants (workspaces): the operator's commands."""


@tenants.command("create")
@click.argument("name")
@json_option
@with_library
def create_tenant(name: str, as_json: bool, library: Library) -> None:
    """Create a tenant; give it a first key with `citewell keys create --tenant`."""
    from citewell.render.records import TenantObject

    tenant = library.keys.create_tenant(name, by=Principal.local())
    if as_json:
        echo_json(TenantObject.render(tenant).model_dump(mode="json"))
    else:
        click.echo(tenant.id)


@tenants.command("list")
@json_option
@with_library
def list_tenants(as_json: bool, library: Library) -> None:
    """List the tenants, the default one first."""
    from citewell.render.records import TenantObject

    found = library.keys.tenants(by=Principal.local())
    echo_records(found, as_json, TenantObject.render, lambda t: f"{t.id}\t{t.name}")


@main.group()
def keys() -> None:
    """Create, list and revoke API keys."""


@keys.command("create")
@click.option(
    "--permission",
    "permissions",
    multiple=True,
    required=True,
    type=click.Choice([p.value for p in Permission]),
    help="What the key may do (repeatable).",
)
@click.option("--tenant", default=Tenant.DEFAULT_ID, show_default=True, help="Tenant id.")
@click.option("--name", default="", help="What the key is for.")
@click.option("--bucket", "buckets", multiple=True, help="Restrict to this bucket (repeatable).")
@click.option("--label", "labels", multiple=True, help="An ACL label the key holds (repeatable).")
@json_option
@with_library
def create_key(
    permissions: tuple[str, ...],
    tenant: str,
    name: str,
    buckets: tuple[str, ...],
    labels: tuple[str, ...],
    as_json: bool,
    library: Library,
) -> None:
    """Create a key and print its secret: the only time it is shown.

    Without --bucket the key reaches every bucket of the tenant; without --label it sees every
    source, whatever its ACL.
    """
    from citewell.render.records import KeyObject

    owner = Principal(tenant_id=tenant, sees_all_labels=True)
    bucket_ids = [library.get_bucket(b, principal=owner).id for b in buckets]
    key, secret = library.keys.create(
        tenant_id=tenant,
        permissions=[Permission(p) for p in permissions],
        by=Principal.local(),
        name=name,
        bucket_ids=bucket_ids or None,
        acl_labels=labels or None,
    )
    if as_json:
        echo_json(KeyObject.render(key, secret).model_dump(mode="json"))
    else:
        click.echo(secret)


@keys.command("list")
@click.option("--tenant", default=Tenant.DEFAULT_ID, show_default=True, help="Tenant id.")
@json_option
@with_library
def list_keys(tenant: str, as_json: bool, library: Library) -> None:
    """List a tenant's keys (never their secrets), revoked ones too."""
    from citewell.render.records import KeyObject

    found = library.keys.keys(tenant, by=Principal.local())
    echo_records(found, as_json, KeyObject.render, _key_line)


def _key_line(key: ApiKey) -> str:
    state = f"\trevoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else ""
    return f"{key.id}\t{','.join(sorted(key.permissions))}\t{key.name}{state}"


@keys.command("revoke")
@click.argument("key_id")
@with_library
def revoke_key(key_id: str, library: Library) -> None:
    """Revoke a key: requests and signed links made with it fail from now on."""
    library.keys.revoke(key_id, by=Principal.local())
    click.echo(f"revoked {key_id}")
