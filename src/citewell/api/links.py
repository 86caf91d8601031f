"""Signed access links over HTTP: ``GET /v1/links/{token}`` opens what a link names.

A link is opened without an API key (a reader clicks it in a browser), so this router is
included without the key check of the others; the token stands in for the key, checked against
the key as it stands now (``citewell.links``). ``access_urls`` makes the links that answers and
search results carry: to originals, and to pictures of pages, plain or with a cited range
tinted (``citewell.imaging``), ``?width=`` pixels wide, as PNG or ``?format=webp``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from citewell.api.deps import KeyRingDep, LibraryDep
from citewell.api.sources import original_response
from citewell.errors import NotFound, StoreError
from citewell.imaging import MAX_WIDTH, MIN_WIDTH, ImageFormat, encode, page_image
from citewell.library import Library
from citewell.links import Link, LinkKind, LinkSigner, holder
from citewell.model import Page, Permission, Principal, Span
from citewell.render.common import AccessUrl

__all__ = ["DEFAULT_WIDTH", "access_urls", "router"]

DEFAULT_WIDTH = 1000
"""Width of a page's picture, in pixels, when the link asks for none."""

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
    """How this request's answer or results link to sources and their pages: signed links for
    its caller, under the permission it used, all expiring together (so a stream and its final
    object agree)."""
    signer = get_signer(request)
    return _SignedLinks(
        signer, str(request.base_url).rstrip("/"), principal, permission, signer.expiry()
    )


class _SignedLinks:
    def __init__(
        self,
        signer: LinkSigner,
        base: str,
        principal: Principal,
        permission: Permission,
        expires_at: int,
    ) -> None:
        self._signer = signer
        self._base = base
        self._principal = principal
        self._permission = permission
        self._expires_at = expires_at

    def __call__(self, source_id: str) -> str:
        return self._url(source_id)

    def page(self, source_id: str, page_number: int) -> str:
        return self._url(source_id, page_number)

    def highlight(self, source_id: str, page_number: int, span: Span) -> str:
        return self._url(source_id, page_number, span)

    def _url(self, source_id: str, page: int | None = None, span: Span | None = None) -> str:
        link = self._signer.grant(
            self._principal,
            self._permission,
            source_id,
            expires_at=self._expires_at,
            page=page,
            span=span,
        )
        return f"{self._base}/v1/links/{self._signer.sign(link)}"


@router.get(
    "/v1/links/{token}",
    response_class=Response,
    responses={
        200: {
            "description": "The original file, to show inline; or a picture of a page (PNG or "
            "WebP) for a `page` or `highlight` link.",
            "content": {"*/*": {}},
        },
        403: _REFUSED,
        404: {"description": "The source is deleted, or its key may no longer see it."},
    },
)
def open_link(
    token: str,
    request: Request,
    library: LibraryDep,
    keys: KeyRingDep,
    width: Annotated[
        int, Query(ge=MIN_WIDTH, le=MAX_WIDTH, description="Width of a page's picture, in pixels.")
    ] = DEFAULT_WIDTH,
    image_format: Annotated[
        ImageFormat, Query(alias="format", description="Format of a page's picture.")
    ] = ImageFormat.PNG,
    crop: Annotated[
        bool, Query(description="Show only the highlighted boxes and a margin around them.")
    ] = False,
) -> Response:
    """What a signed link names (the source's original file, or a picture of one of its pages),
    for as long as the link and its key allow; no API key needed."""
    signer = get_signer(request)
    link = signer.verify(token)
    principal = holder(link, keys)
    remaining = max(1, link.expires_at - signer.now())
    # Shared caches must not keep it: it is the key's, and it must stop opening on time.
    headers = {"Cache-Control": f"private, max-age={remaining}"}
    if link.kind is LinkKind.ORIGINAL:
        return original_response(
            library, link.source_id, principal, disposition="inline", headers=headers
        )
    source = library.get_source(link.source_id, principal=principal)
    page = _page(library, link, principal)
    picture = page_image(
        library.original(source.id, principal=principal),
        source.mime_type,
        page,
        width=width,
        boxes=library.highlight(source.id, page, link.span, principal=principal)
        if link.span
        else (),
        crop=crop,
    )
    return Response(
        content=encode(picture, image_format),
        media_type=image_format.media_type,
        headers={"X-Content-Type-Options": "nosniff", **headers},
    )


def _page(library: Library, link: Link, principal: Principal) -> Page:
    for page in library.source_pages(link.source_id, principal=principal):
        if page.number == link.page:
            return page
    raise NotFound(f"no page {link.page} in source '{link.source_id}'", param="page")
