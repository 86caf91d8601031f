"""What every router shares: the dependencies a handler declares, and the OpenAI list envelope.

Tests replace a dependency with ``app.dependency_overrides[get_principal] = ...``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Generic, Literal, TypeVar

from fastapi import Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from citewell.engine import Engine
from citewell.errors import StoreError
from citewell.library import Library
from citewell.model import Principal

__all__ = [
    "EngineDep",
    "LibraryDep",
    "ListObject",
    "PrincipalDep",
    "WireModel",
    "WireObject",
    "get_engine",
    "get_library",
    "get_principal",
]


def get_library(request: Request) -> Library:
    library: Library | None = getattr(request.app.state, "library", None)
    if library is None:
        # Only reachable when the app is driven without its lifespan (the library opens there).
        raise StoreError("The library is not open yet.")
    return library


def get_engine(request: Request) -> Engine:
    engine: Engine | None = getattr(request.app.state, "engine", None)
    if engine is None:
        raise StoreError("The answer engine is not open yet.")
    return engine


def get_principal() -> Principal:
    """Who is calling. Until API keys exist, every caller is the local user."""
    return Principal.local()


EngineDep = Annotated[Engine, Depends(get_engine)]
LibraryDep = Annotated[Library, Depends(get_library)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]


class WireModel(BaseModel):
    """A JSON object citewell sends or accepts; unknown request fields are refused."""

    model_config = ConfigDict(extra="forbid")


class WireObject(WireModel):
    """An object with an id, as OpenAI's list items are."""

    id: str = Field(description="Stable identifier.")


T = TypeVar("T", bound=WireObject)


class ListObject(WireModel, Generic[T]):
    """OpenAI's list envelope. Everything fits in one page, so ``has_more`` is always false
    (the OpenAI SDK keeps paginating unless it reads an explicit false)."""

    object: Literal["list"] = "list"
    data: list[T] = Field(description="The items, in order.")
    first_id: str | None = Field(description="Id of the first item; null when empty.")
    last_id: str | None = Field(description="Id of the last item; null when empty.")
    has_more: Literal[False] = Field(default=False, description="Always false.")

    @classmethod
    def of(cls, items: Sequence[T]) -> ListObject[T]:
        return cls(
            data=list(items),
            first_id=items[0].id if items else None,
            last_id=items[-1].id if items else None,
        )
