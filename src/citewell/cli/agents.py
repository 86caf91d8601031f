"""Agents: named ways of answering, a scope and a policy (``citewell.model.Agent``); the
commands call ``Engine.create_agent``, ``update_agent`` and ``delete_agent``, as ``/v1/agents``
does. Clients name an agent as their ``model``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click
from pydantic import ValidationError

from citewell.cli.common import RequestFailed, echo_json, json_option, main, with_engine
from citewell.model import Agent, Principal, Tenant

if TYPE_CHECKING:
    from citewell.engine import Engine


@main.group()
def agents() -> None:
    """A tenant's agents: which buckets they answer from, and how."""


def tenant_option(command: Any) -> Any:
    return click.option(
        "--tenant", default=Tenant.DEFAULT_ID, show_default=True, help="Tenant id."
    )(command)


def fields_options(command: Any) -> Any:
    command = click.option(
        "--bucket",
        "buckets",
        multiple=True,
        help="A bucket it answers from, by slug or id (repeatable). [default: every bucket]",
    )(command)
    return click.option(
        "--set",
        "fields",
        multiple=True,
        metavar="FIELD=VALUE",
        help="Another field of the agent, as JSON where it parses, else text (repeatable): "
        "generator=extractive, strict=true, max_passages=4, description='Bike handbook'.",
    )(command)


@agents.command("list")
@tenant_option
@json_option
@with_engine
def list_agents(tenant: str, as_json: bool, engine: Engine) -> None:
    """The configured agents, then the tenant's own."""
    configured = {agent.name for agent in engine.configured_agents}
    found = engine.agents(tenant_id=tenant)
    if as_json:
        echo_json([_record(agent, configured=agent.name in configured) for agent in found])
        return
    for agent in found:
        scope = ",".join(agent.bucket_ids) or "*"
        kind = "configured" if agent.name in configured else "own"
        click.echo(f"{agent.name}\t{kind}\t{agent.generator}\t{scope}\t{agent.description}")


@agents.command("create")
@click.argument("name")
@fields_options
@tenant_option
@json_option
@with_engine
def create_agent(name: str, engine: Engine, **options: Any) -> None:
    """Create an agent of the tenant; the fields not given take their defaults."""
    spec = {**_changes(options["buckets"], options["fields"]), "name": name}
    try:
        agent = Agent.model_validate(spec)
    except ValidationError as exc:
        raise RequestFailed(_first_error(exc)) from None
    kept = engine.create_agent(agent, principal=Principal(tenant_id=options["tenant"]))
    _show(kept, options["as_json"])


@agents.command("update")
@click.argument("name")
@fields_options
@tenant_option
@json_option
@with_engine
def update_agent(name: str, engine: Engine, **options: Any) -> None:
    """Change the fields given of the tenant's agent; the others are kept."""
    changes = _changes(options["buckets"], options["fields"])
    kept = engine.update_agent(name, changes, principal=Principal(tenant_id=options["tenant"]))
    _show(kept, options["as_json"])


@agents.command("delete")
@click.argument("name")
@tenant_option
@with_engine
def delete_agent(name: str, tenant: str, engine: Engine) -> None:
    """Delete the tenant's agent (a configured one cannot be)."""
    engine.delete_agent(name, principal=Principal(tenant_id=tenant))
    click.echo(f"deleted agent {name}")


def _changes(buckets: tuple[str, ...], fields: tuple[str, ...]) -> dict[str, Any]:
    changes = dict(_field(item) for item in fields)
    if buckets:
        changes["bucket_ids"] = list(buckets)
    return changes


def _field(item: str) -> tuple[str, Any]:
    name, sep, text = item.partition("=")
    if not sep or not name:
        raise click.BadParameter(f"{item!r} is not FIELD=VALUE", param_hint="--set")
    try:
        return name, json.loads(text)
    except json.JSONDecodeError:
        return name, text


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"])
    return f"invalid {field}: {first['msg']}"


def _record(agent: Agent, *, configured: bool) -> dict[str, Any]:
    return {**agent.model_dump(mode="json"), "configured": configured}


def _show(agent: Agent, as_json: bool) -> None:
    if as_json:
        echo_json(_record(agent, configured=False))
    else:
        scope = ",".join(agent.bucket_ids) or "every bucket"
        click.echo(f"agent {agent.name}: {agent.generator}, {scope}")
