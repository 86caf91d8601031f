"""What every router shares: the dependencies a handler declares, and the OpenAI list envelope.

A handler names what the caller must be allowed to do by the type of its principal:
``principal: Asking`` (or ``Searching``, ``Ingesting``, ``Managing``, ``Exporting``,
``Deleting``) answers 403 to a key without that permission; ``PrincipalDep`` only needs a valid
key (what reading a list or an object needs). Tests replace the caller with
``app.dependency_overrides[get_principal] = ...``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Request

from citewell.access import KeyRing
from citewell.engine import Engine
from citewell.errors import PermissionDenied, StoreError
from citewell.library import Library
from citewell.model import Permission, Principal

__all__ = [
    "Asking",
    "Deleting",
    "EngineDep",
    "Exporting",
    "Ingesting",
    "KeyRingDep",
    "LibraryDep",
    "Managing",
    "PrincipalDep",
    "Searching",
    "get_engine",
    "get_library",
    "get_principal",
    "presented_key",
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


def get_keys(request: Request) -> KeyRing:
    keys: KeyRing | None = getattr(request.app.state, "keys", None)
    if keys is None:
        raise StoreError("The key store is not open yet.")
    return keys


def presented_key(request: Request) -> str | None:
    """The key the request carries: OpenAI's ``Authorization: Bearer`` or Anthropic's
    ``x-api-key``."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.headers.get("x-api-key") or None


def get_principal(request: Request) -> Principal:
    """Who is calling: the principal of the key presented (``citewell.access``)."""
    return get_keys(request).principal(presented_key(request))


EngineDep = Annotated[Engine, Depends(get_engine)]
KeyRingDep = Annotated[KeyRing, Depends(get_keys)]
LibraryDep = Annotated[Library, Depends(get_library)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]

_VERBS = {
    Permission.ASK: "ask for answers",
    Permission.SEARCH: "search or read sources",
    Permission.INGEST: "add sources or files",
    Permission.MANAGE: "manage buckets, agents or keys",
    Permission.EXPORT: "export buckets",
    Permission.DELETE: "delete",
}


def _allowed(permission: Permission) -> Callable[[Principal], Principal]:
    def check(principal: PrincipalDep) -> Principal:
        if permission not in principal.permissions:
            raise PermissionDenied(
                f"This API key may not {_VERBS[permission]}: it lacks the '{permission}' "
                "permission."
            )
        return principal

    return check


Asking = Annotated[Principal, Depends(_allowed(Permission.ASK))]
Searching = Annotated[Principal, Depends(_allowed(Permission.SEARCH))]
Ingesting = Annotated[Principal, Depends(_allowed(Permission.INGEST))]
Managing = Annotated[Principal, Depends(_allowed(Permission.MANAGE))]
Exporting = Annotated[Principal, Depends(_allowed(Permission.EXPORT))]
Deleting = Annotated[Principal, Depends(_allowed(Permission.DELETE))]
