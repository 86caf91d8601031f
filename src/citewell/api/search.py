"""Search without generation: ``POST /v1/search``, and the renderer of its results.

``render_results`` is the one renderer of search results: the HTTP API returns it and
``citewell search --json`` prints it, so both show the same objects.

All offsets are Unicode code points into the source's canonical text (``GET
/v1/sources/{id}/text``), start inclusive, end exclusive: ``text[span.start:span.end]``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Request
from pydantic import AfterValidator, Field

from citewell.api.deps import LibraryDep, Searching
from citewell.api.links import access_urls
from citewell.model import (
    CompoundFilter,
    Filter,
    Permission,
    SearchRequest,
)
from citewell.render.records import (
    SearchResult,
    SearchResults,
    render_results,
)

__all__ = [
    "BoundedFilter",
    "SearchBody",
    "SearchResult",
    "SearchResults",
    "render_results",
    "router",
]

router = APIRouter(tags=["search"])

MAX_FILTER_DEPTH = 8
"""Deepest nesting of compound filters accepted; real filters need two or three levels."""
MAX_FILTER_CONDITIONS = 256


def _bounded(filter_: Filter) -> Filter:
    depth, conditions = _filter_size(filter_)
    if depth > MAX_FILTER_DEPTH:
        raise ValueError(f"filters may nest at most {MAX_FILTER_DEPTH} levels deep")
    if conditions > MAX_FILTER_CONDITIONS:
        raise ValueError(f"filters may hold at most {MAX_FILTER_CONDITIONS} comparisons")
    return filter_


def _filter_size(filter_: Filter) -> tuple[int, int]:
    """Nesting depth and number of comparisons, without recursion (the input is untrusted)."""
    depth, conditions = 0, 0
    stack: list[tuple[Filter, int]] = [(filter_, 1)]
    while stack:
        node, level = stack.pop()
        depth = max(depth, level)
        if isinstance(node, CompoundFilter):
            stack.extend((child, level + 1) for child in node.filters)
        else:
            conditions += 1
    return depth, conditions


BoundedFilter = Annotated[Filter, AfterValidator(_bounded)]
"""A filter of untrusted input: at most MAX_FILTER_DEPTH levels and MAX_FILTER_CONDITIONS
comparisons, checked without recursion."""


class SearchBody(SearchRequest):
    """The body of ``POST /v1/search``: a ``SearchRequest`` whose buckets are called ``buckets``."""

    bucket_ids: tuple[str, ...] = Field(
        validation_alias="buckets",
        min_length=1,
        max_length=100,
        description="Buckets searched, by id or slug.",
    )
    filters: BoundedFilter | None = Field(
        default=None, description="Conditions on source attributes."
    )


@router.post("/v1/search")
def search(
    body: SearchBody, request: Request, library: LibraryDep, principal: Searching
) -> SearchResults:
    """Ranked passages for a query, with their best sentences, pages, scores and links."""
    passages = library.search(body, principal=principal)
    return render_results(body.query, passages, access_urls(request, principal, Permission.SEARCH))
