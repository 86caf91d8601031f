"""Search without generation: ranked passages with their best sentences, pages and scores."""

from __future__ import annotations

from collections.abc import Sequence

from citewell.config import RetrieveSettings
from citewell.embed.base import Embedder
from citewell.locator import page_at
from citewell.model import (
    Chunk,
    Page,
    Passage,
    Principal,
    RetrievalMode,
    ScoreBreakdown,
    SearchRequest,
    SentenceMatch,
    Source,
)
from citewell.retrieve.sentences import rank_sentences
from citewell.store.base import ChunkHit, FusedHit, Fusion, Scope, SourceStore

__all__ = ["fusion_for", "search"]


def search(
    store: SourceStore,
    embedder: Embedder,
    request: SearchRequest,
    *,
    bucket_ids: Sequence[str],
    principal: Principal,
    settings: RetrieveSettings,
) -> list[Passage]:
    """Passages for ``request``, best first, within ``bucket_ids`` as seen by ``principal``."""
    scope = Scope(
        principal=principal,
        bucket_ids=tuple(bucket_ids),
        filters=request.filters,
        include_superseded=request.include_superseded,
    )
    hits = _ranked_hits(store, embedder, request, scope, settings)
    return _passages(store, request.query, hits, settings.sentences_per_passage)


def _ranked_hits(
    store: SourceStore,
    embedder: Embedder,
    request: SearchRequest,
    scope: Scope,
    settings: RetrieveSettings,
) -> list[FusedHit]:
    limit = request.max_results
    if request.mode is RetrievalMode.LEXICAL:
        hits = store.search_lexical(request.query, scope, limit=limit)
        return _single_list(hits, lexical=True)
    vector = embedder.embed_query(request.query)
    if request.mode is RetrievalMode.DENSE:
        return _single_list(store.search_dense(vector, scope, limit=limit), lexical=False)
    fusion = fusion_for(settings, embedder, limit)
    return store.search_hybrid(request.query, vector, scope, limit=limit, fusion=fusion)


def fusion_for(settings: RetrieveSettings, embedder: Embedder, limit: int = 0) -> Fusion:
    """How to fuse: the settings, with the embedder's tuned weight unless one is set."""
    weight = settings.lexical_weight
    return Fusion(
        method=settings.fusion,
        lexical_weight=embedder.lexical_weight if weight is None else weight,
        rrf_k=settings.rrf_k,
        candidates=max(settings.candidates, limit),
    )


def _single_list(hits: Sequence[ChunkHit], *, lexical: bool) -> list[FusedHit]:
    """Scores of one retriever, with ``fused`` in [0, 1] (BM25 relative to the best hit)."""
    top = hits[0].score if hits else 1.0
    fused: list[FusedHit] = []
    for rank, hit in enumerate(hits, start=1):
        if lexical:
            scores = ScoreBreakdown(
                fused=hit.score / top if top > 0 else 0.0, lexical=hit.score, lexical_rank=rank
            )
        else:
            scores = ScoreBreakdown(
                fused=min(1.0, max(0.0, hit.score)), dense=hit.score, dense_rank=rank
            )
        fused.append(FusedHit(chunk_id=hit.chunk_id, scores=scores))
    return fused


def _passages(
    store: SourceStore, query: str, hits: Sequence[FusedHit], sentences_per_passage: int
) -> list[Passage]:
    chunks = store.get_chunks([hit.chunk_id for hit in hits])
    sources = store.get_sources({chunk.source_id for chunk in chunks.values()})
    pages: dict[str, tuple[Page, ...]] = {}
    passages = []
    for hit in hits:
        chunk = chunks.get(hit.chunk_id)
        source = sources.get(chunk.source_id) if chunk else None
        if chunk is None or source is None:
            continue  # removed between ranking and reading: never report it
        if source.page_count and source.id not in pages:
            pages[source.id] = store.source_pages(source.id)
        passages.append(
            _passage(
                query, chunk, source, hit.scores, pages.get(source.id, ()), sentences_per_passage
            )
        )
    return passages


def _passage(
    query: str,
    chunk: Chunk,
    source: Source,
    scores: ScoreBreakdown,
    pages: Sequence[Page],
    sentences_per_passage: int,
) -> Passage:
    ranked = rank_sentences(query, chunk)
    best = [pair for pair in ranked if pair[1] > 0][:sentences_per_passage] or ranked[:1]
    matches = []
    for span, score in best:
        page = page_at(pages, span.start)
        matches.append(
            SentenceMatch(
                span=span,
                text=chunk.text[span.start - chunk.span.start : span.end - chunk.span.start],
                score=round(score, 4),
                page_number=page.number if page else None,
                page_label=page.label if page else None,
            )
        )
    first_page = page_at(pages, chunk.span.start)
    return Passage(
        chunk=chunk,
        source=source,
        pages=tuple(pages),
        scores=scores,
        sentences=tuple(matches),
        page_number=first_page.number if first_page else None,
        page_label=first_page.label if first_page else None,
    )
