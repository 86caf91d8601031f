"""``GET /healthz``: answers once the library is open, so supervisors know when to send traffic."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends

from citewell.api.deps import get_library
from citewell.render.records import WireModel

__all__ = ["router"]

router = APIRouter(tags=["health"])


class Health(WireModel):
    status: Literal["ok"] = "ok"


@router.get("/healthz", dependencies=[Depends(get_library)])
def health() -> Health:
    """``{"status": "ok"}``; 503 in the error shape while the library is not open."""
    return Health()
