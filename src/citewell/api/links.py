"""Signed access links over HTTP: ``GET /v1/links/{token}`` opens what a link names.

A link is opened without an API key (a reader clicks it in a browser), so this router is
included without the key check of the others; the token stands in for the key, checked against
the key as it stands now (``citewell.links``). ``access_urls`` makes the links that answers and
search results carry.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from citewell.api.deps import KeyRingDep, LibraryDep
from citewell.api.errors import error_response
from citewell.api.sources import original_response
from citewell.errors import StoreError
from citewell.links import LinkRefused, LinkSigner, holder
from citewell.model import Permission, Principal
from citewell.render.common import AccessUrl

__all__ = ["access_urls", "router"]

router = APIRouter(tags=["links"])

_REFUSED = {
    "description": "The link does not open: `link_invalid` (not made by this server, or changed), "
    "`link_expired`, `key_revoked` (its key is revoked) or `permission_denied` (its key lost "
    "the permission it was made under).",
}


def get_signer(request: Request) -> LinkSigner:
    signer: LinkSigner | None = getattr(request.app.state, "links", None)
    if signer is None:
        raise StoreError("The link signer is not open yet.")
    return signer


def access_urls(request: Request, principal: Principal, permission: Permission) -> AccessUrl:
    """How this request's answer or results link to sources: signed links for its caller, under
    the permission it used, all expiring together (so a stream and its final object agree)."""
    signer = get_signer(request)
    base = str(request.base_url).rstrip("/")
    expires_at = signer.expiry()

    def access_url(source_id: str) -> str:
        token = signer.sign(signer.grant(principal, permission, source_id, expires_at=expires_at))
        return f"{base}/v1/links/{token}"

    return access_url


@router.get(
    "/v1/links/{token}",
    response_class=Response,
    responses={
        200: {"description": "The original file, to show inline.", "content": {"*/*": {}}},
        403: _REFUSED,
        404: {"description": "The source is deleted, or its key may no longer see it."},
    },
)
def open_link(token: str, request: Request, library: LibraryDep, keys: KeyRingDep) -> Response:
    """What a signed link names (the source's original file), for as long as the link and its
    key allow; no API key needed."""
    signer = get_signer(request)
    try:
        link = signer.verify(token)
        principal = holder(link, keys)
    except LinkRefused as refused:
        return error_response(403, refused.message, param=refused.param, code=refused.reason)
    remaining = max(1, link.expires_at - signer.now())
    return original_response(
        library,
        link.source_id,
        principal,
        disposition="inline",
        # Shared caches must not keep it: it is the key's, and it must stop opening on time.
        headers={"Cache-Control": f"private, max-age={remaining}"},
    )
