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

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, status

from citewell.api.deps import EngineDep, Managing, PrincipalDep
from citewell.model import Agent
from citewell.render.records import ListObject, WireModel, WireObject

__all__ = ["AgentObject", "router"]

router = APIRouter(prefix="/v1/agents", tags=["agents"])


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
    return AgentObject.render(engine.create_agent(agent, principal=principal), configured=False)


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
    changed = engine.update_agent(name, changes, principal=principal)
    return AgentObject.render(changed, configured=False)


@router.delete("/{name}")
def delete_agent(name: str, engine: EngineDep, principal: Managing) -> AgentDeleted:
    engine.delete_agent(name, principal=principal)
    return AgentDeleted(id=name)
