"""OpenAI's model list: ``GET /v1/models`` names the agents a client may ask for as ``model``."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from pydantic import Field

from citewell.api.answering import find_agent
from citewell.api.deps import EngineDep, PrincipalDep
from citewell.model import Agent
from citewell.render.records import ListObject, WireObject

__all__ = ["ModelObject", "router"]

router = APIRouter(tags=["models"])


class ModelObject(WireObject):
    """An agent, as OpenAI describes a model."""

    object: Literal["model"] = "model"
    created: int = Field(description="When the server started, in Unix seconds.")
    owned_by: str = Field(default="citewell", description="Always 'citewell'.")
    description: str = Field(description="What the agent is for.")

    @classmethod
    def render(cls, agent: Agent, created: int) -> ModelObject:
        return cls(id=agent.name, created=created, description=agent.description)


@router.get("/v1/models")
def list_models(
    request: Request, engine: EngineDep, principal: PrincipalDep
) -> ListObject[ModelObject]:
    """The agents: the configured ones (the default agent first unless set), then the
    tenant's own (``/v1/agents``)."""
    created = request.app.state.started_at
    agents = engine.agents(tenant_id=principal.tenant_id)
    return ListObject.of([ModelObject.render(a, created) for a in agents])


@router.get("/v1/models/{model}", response_model=None)
def get_model(
    model: str, request: Request, engine: EngineDep, principal: PrincipalDep
) -> ModelObject:
    """One agent; 404 ``model_not_found`` for a name no agent of the caller's has."""
    agent = find_agent(engine, model, principal)
    return ModelObject.render(agent, request.app.state.started_at)
