"""Search without generation: ``POST /v1/search``, and the renderer of its results.

``render_results`` is the one renderer of search results: the HTTP API returns it and
``citewell search --json`` prints it, so both show the same objects.

All offsets are Unicode code points into the source's canonical text (``GET
/v1/sources/{id}/text``), start inclusive, end exclusive: ``text[span.start:span.end]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from fastapi import APIRouter, Request
from pydantic import AfterValidator, Field

from citewell.api.deps import LibraryDep, Searching, WireModel
from citewell.api.links import access_urls
from citewell.api.sources import SourceObject, SpanObject
from citewell.locator import locator_label, source_label
from citewell.model import (
    CompoundFilter,
    Filter,
    Modality,
    Passage,
    Permission,
    ScoreBreakdown,
    SearchRequest,
)
from citewell.render.common import AccessUrl, passage_pictures

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


class ScoresObject(WireModel):
    fused: float = Field(description="Fused score in [0, 1]; results are ranked by it.")
    lexical: float | None = Field(description="BM25 score; null if the passage did not match.")
    lexical_rank: int | None = Field(description="1-based rank among BM25 hits.")
    dense: float | None = Field(description="Cosine similarity; null if not ranked.")
    dense_rank: int | None = Field(description="1-based rank among dense hits.")

    @classmethod
    def render(cls, scores: ScoreBreakdown) -> ScoresObject:
        return cls(**scores.model_dump())


class SentenceObject(WireModel):
    start: int = Field(description="First code point of the sentence in the canonical text.")
    end: int = Field(description="Code point after the sentence (exclusive).")
    text: str
    score: float = Field(description="How well the sentence matches the query, in [0, 1].")
    page_number: int | None = Field(description="1-based page the sentence starts on.")
    page_label: str | None = Field(description="That page's own label, if the document has one.")


class SearchResult(WireModel):
    chunk_id: str
    source_id: str = Field(description="The source version the passage belongs to.")
    file_id: str = Field(description="The same as source_id, for clients of OpenAI file search.")
    bucket_id: str
    filename: str
    label: str = Field(description="How to name the passage to a reader: 'handbook.pdf (p. 4)'.")
    page_number: int | None = Field(description="1-based page the passage starts on.")
    page_label: str | None = Field(description="That page's own label, if the document has one.")
    locator_label: str | None = Field(
        description="Where the passage lies: 'p. 4' (the page's label if it has one, as 'p. iv'), "
        "or for sources without pages the innermost heading ('§ Refunds'); else null."
    )
    modality: Modality = Field(description="What the source is made of.")
    mime_type: str
    text: str = Field(description="The passage: exactly text[span.start:span.end] of the source.")
    score: float = Field(description="Fused score in [0, 1].")
    scores: ScoresObject
    span: SpanObject = Field(description="Range of the source's canonical text, in code points.")
    heading_path: list[str] = Field(description="Headings enclosing the passage, outermost first.")
    pages: list[int] = Field(description="Pages the passage lies on; empty without pages.")
    sentences: list[SentenceObject] = Field(description="Best-matching sentences, best first.")
    source: SourceObject
    access_url: str | None = Field(
        description="A signed link opening the source's original file, without a key, for a "
        "while (GET /v1/links/{token}); null from `citewell search --json`, which serves none."
    )
    image_url: str | None = Field(
        description="A signed link to a picture of the page the best sentence starts on "
        "(`?width=`, `?format=webp`); null for sources without pages, and from the CLI."
    )
    highlight_url: str | None = Field(
        description="The same picture with the best sentence's boxes tinted (`?crop=true`: only "
        "around them); null where image_url is."
    )

    @classmethod
    def render(cls, passage: Passage, access_url: AccessUrl | None) -> SearchResult:
        chunk, source = passage.chunk, passage.source
        image_url, highlight_url = passage_pictures(passage, access_url) or (None, None)
        locator = locator_label(
            page_number=passage.page_number,
            page_label=passage.page_label,
            heading_path=chunk.heading_path,
        )
        return cls(
            chunk_id=chunk.id,
            source_id=source.id,
            file_id=source.id,
            bucket_id=source.bucket_id,
            filename=source.filename,
            label=source_label(source.filename, locator),
            page_number=passage.page_number,
            page_label=passage.page_label,
            locator_label=locator,
            modality=source.modality,
            mime_type=source.mime_type,
            text=chunk.text,
            score=passage.scores.fused,
            scores=ScoresObject.render(passage.scores),
            span=SpanObject(start=chunk.span.start, end=chunk.span.end),
            heading_path=list(chunk.heading_path),
            pages=list(chunk.page_numbers),
            sentences=[
                SentenceObject(
                    start=s.span.start,
                    end=s.span.end,
                    text=s.text,
                    score=s.score,
                    page_number=s.page_number,
                    page_label=s.page_label,
                )
                for s in passage.sentences
            ],
            source=SourceObject.render(source),
            access_url=access_url(source.id) if access_url else None,
            image_url=image_url,
            highlight_url=highlight_url,
        )


class SearchResults(WireModel):
    object: Literal["list"] = "list"
    search_query: str = Field(description="The query, as received.")
    data: list[SearchResult] = Field(description="Passages, best first.")
    has_more: Literal[False] = Field(default=False, description="Always false.")


def render_results(
    query: str, passages: Sequence[Passage], access_url: AccessUrl | None = None
) -> SearchResults:
    """The results of a search; ``access_url`` makes their links (None: they have none)."""
    return SearchResults(
        search_query=query, data=[SearchResult.render(p, access_url) for p in passages]
    )


@router.post("/v1/search")
def search(
    body: SearchBody, request: Request, library: LibraryDep, principal: Searching
) -> SearchResults:
    """Ranked passages for a query, with their best sentences, pages, scores and links."""
    passages = library.search(body, principal=principal)
    return render_results(body.query, passages, access_urls(request, principal, Permission.SEARCH))
