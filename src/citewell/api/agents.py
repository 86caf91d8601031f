"""Agents over HTTP: ``/v1/agents``. Clients name an agent as their ``model``.

An agent is a scope (buckets, filters) and a policy (generator and model, how many passages and
sources, the verifier and its threshold, strictness, whether sources are shown, the refusal
wording); its fields are ``citewell.model.Agent``'s. The agents the server was started with
(``citewell-agent`` at least) belong to every tenant, are listed with ``"configured": true`` and
cannot be changed; a tenant's own agents are created, changed and deleted here, by a key with
``manage``, and appear in ``/v1/models``. Buckets are named by id or slug and kept as ids, so an
agent keeps its scope when a bucket is renamed.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, status
from pydantic import ValidationError

from citewell.api.deps import (
    EngineDep,
    ListObject,
    Managing,
    PrincipalDep,
    WireModel,
    WireObject,
)
from citewell.engine import Engine
from citewell.errors import Conflict, InvalidRequest, NotFound
from citewell.model import Agent, Principal

__all__ = ["AgentObject", "router"]

router = APIRouter(prefix="/v1/agents", tags=["agents"])

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class AgentObject(Agent, WireObject):
    """An agent, with its name as ``id`` too (OpenAI's lists page by id)."""

    object: Literal["agent"] = "agent"
    configured: bool = False

    @classmethod
    def render(cls, agent: Agent, *, configured: bool) -> AgentObject:
        return cls(id=agent.name, configured=configured, **agent.model_dump())


class AgentDeleted(WireModel):
    id: str
    object: Literal["agent.deleted"] = "agent.deleted"
    deleted: Literal[True] = True


@router.get("")
def list_agents(engine: EngineDep, principal: PrincipalDep) -> ListObject[AgentObject]:
    """The configured agents, then the tenant's own, in order of creation."""
    configured = {a.name for a in engine.configured_agents}
    agents = engine.agents(tenant_id=principal.tenant_id)
    return ListObject[AgentObject].of(
        [AgentObject.render(a, configured=a.name in configured) for a in agents]
    )


@router.post("", status_code=status.HTTP_201_CREATED)
def create_agent(agent: Agent, engine: EngineDep, principal: Managing) -> AgentObject:
    """A new agent of the caller's tenant; 409 if the name is taken."""
    if not _NAME.fullmatch(agent.name):
        raise InvalidRequest(
            "An agent's name is 1-64 letters, digits, '.', '_' or '-', starting with a letter "
            "or digit.",
            param="name",
        )
    if any(a.name == agent.name for a in engine.agents(tenant_id=principal.tenant_id)):
        raise Conflict(f"An agent named '{agent.name}' exists already.", param="name")
    return _kept(engine, agent, principal)


@router.get("/{name}")
def get_agent(name: str, engine: EngineDep, principal: PrincipalDep) -> AgentObject:
    agent = engine.agent(name, tenant_id=principal.tenant_id)
    configured = agent in engine.configured_agents
    return AgentObject.render(agent, configured=configured)


@router.post("/{name}")
def update_agent(
    name: str,
    engine: EngineDep,
    principal: Managing,
    changes: Annotated[
        dict[str, Any], Body(description="The fields to change; the others are kept.")
    ],
) -> AgentObject:
    current = _own(engine, name, principal)
    if changes.get("name", name) != name:
        raise InvalidRequest("An agent cannot be renamed; create another.", param="name")
    try:
        changed = Agent.model_validate({**current.model_dump(), **changes})
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(part) for part in first["loc"]) or None
        raise InvalidRequest(f"Invalid '{param}': {first['msg']}.", param=param) from None
    return _kept(engine, changed, principal)


@router.delete("/{name}")
def delete_agent(name: str, engine: EngineDep, principal: Managing) -> AgentDeleted:
    _own(engine, name, principal)
    engine.library.store.delete_agent(name, tenant_id=principal.tenant_id)
    return AgentDeleted(id=name)


def _own(engine: Engine, name: str, principal: Principal) -> Agent:
    """The tenant's agent of this name; 409 for a configured one, 404 for none."""
    if any(a.name == name for a in engine.configured_agents):
        raise Conflict(f"The agent '{name}' is configured by the server: it cannot change.")
    own = engine.library.store.list_agents(tenant_id=principal.tenant_id)
    agent = next((a for a in own if a.name == name), None)
    if agent is None:
        raise NotFound(f"No agent named '{name}'.", param="name")
    return agent


def _kept(engine: Engine, agent: Agent, principal: Principal) -> AgentObject:
    """Check what the agent names, keep it with its buckets as ids, and render it."""
    if agent.generator not in engine.generators:
        known = ", ".join(sorted(engine.generators))
        raise InvalidRequest(
            f"No generator named '{agent.generator}'; this server has: {known}.",
            param="generator",
        )
    library = engine.library
    bucket_ids = tuple(library.get_bucket(b, principal=principal).id for b in agent.bucket_ids)
    kept = agent.model_copy(update={"bucket_ids": bucket_ids})
    library.store.put_agent(kept, tenant_id=principal.tenant_id)
    return AgentObject.render(kept, configured=False)
