"""Fusing a lexical and a dense ranking into one list, with each retriever's part kept visible.

Two methods (``Fusion.method``):

- ``rrf``: weighted reciprocal-rank fusion, ``w/(k + rank_lex) + (1-w)/(k + rank_dense)``. It looks
  only at ranks, so BM25 scores and cosines never need to be made comparable.
- ``convex``: ``w·lex + (1-w)·dense`` over scores min-max normalised per list; it keeps how far
  apart the hits are, which ranks throw away.

A hit missing from a list contributes 0 there. The fused score is divided by the best score
achievable, so a hit ranked first by both retrievers scores exactly 1.0. When one list is empty the
other gets the whole weight: fusion then reproduces that list's order rather than scoring every hit
by a weight that no hit can earn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from citewell.model import ScoreBreakdown
from citewell.store.base import ChunkHit, FusedHit, Fusion

__all__ = ["best_part", "fuse"]


@dataclass(frozen=True, slots=True)
class _Ranked:
    """One hit's place in one list: its 1-based rank, raw score and normalised contribution."""

    rank: int
    score: float
    part: float


@dataclass(frozen=True, slots=True)
class _Method:
    parts: Callable[[Sequence[ChunkHit], Fusion], dict[str, _Ranked]]
    """Each listed chunk's rank, score and contribution."""
    best: Callable[[Fusion], float]
    """The largest contribution one list can make."""


def fuse(
    lexical: Sequence[ChunkHit], dense: Sequence[ChunkHit], fusion: Fusion, *, limit: int
) -> list[FusedHit]:
    """The union of both lists, best first; ties are broken by chunk id so results are stable.

    Both inputs must be ranked best first. A chunk listed twice in one list keeps its first place.
    """
    if limit <= 0 or not (lexical or dense):
        return []
    method = _METHODS[fusion.method]
    weight = _effective_lexical_weight(lexical, dense, fusion.lexical_weight)
    lex, den = method.parts(lexical, fusion), method.parts(dense, fusion)
    # The same expression as a hit's score, so a hit first in both lists divides to exactly 1.0.
    best = weight * best_part(fusion) + (1 - weight) * best_part(fusion)
    raw = {
        chunk_id: weight * _part(lex, chunk_id) + (1 - weight) * _part(den, chunk_id)
        for chunk_id in lex.keys() | den.keys()
    }
    ranked = sorted(raw, key=lambda chunk_id: (-raw[chunk_id], chunk_id))[:limit]
    return [
        FusedHit(
            chunk_id,
            _breakdown(min(1.0, raw[chunk_id] / best), lex.get(chunk_id), den.get(chunk_id)),
        )
        for chunk_id in ranked
    ]


def best_part(fusion: Fusion) -> float:
    """The largest contribution one list can make: a fused score is divided by it."""
    return _METHODS[fusion.method].best(fusion)


def _effective_lexical_weight(
    lexical: Sequence[ChunkHit], dense: Sequence[ChunkHit], weight: float
) -> float:
    # A retriever that returned nothing (a query of stopwords, no embedder) must not drag every
    # fused score down or, at weight 1, flatten the other list into a tie.
    if not lexical:
        return 0.0
    if not dense:
        return 1.0
    return weight


def _rrf_parts(hits: Sequence[ChunkHit], fusion: Fusion) -> dict[str, _Ranked]:
    ranks: dict[str, _Ranked] = {}
    for rank, hit in enumerate(hits, start=1):
        ranks.setdefault(hit.chunk_id, _Ranked(rank, hit.score, 1.0 / (fusion.rrf_k + rank)))
    return ranks


def _convex_parts(hits: Sequence[ChunkHit], fusion: Fusion) -> dict[str, _Ranked]:
    del fusion  # convex fusion has no parameter of its own beyond the weight
    if not hits:
        return {}
    low = min(hit.score for hit in hits)
    spread = max(hit.score for hit in hits) - low
    ranks: dict[str, _Ranked] = {}
    for rank, hit in enumerate(hits, start=1):
        # One hit, or hits that all score alike, carry no spread: each counts as the best.
        part = (hit.score - low) / spread if spread > 0 else 1.0
        ranks.setdefault(hit.chunk_id, _Ranked(rank, hit.score, part))
    return ranks


_METHODS: dict[str, _Method] = {
    "rrf": _Method(_rrf_parts, best=lambda fusion: 1.0 / (fusion.rrf_k + 1)),
    "convex": _Method(_convex_parts, best=lambda fusion: 1.0),
}


def _part(parts: dict[str, _Ranked], chunk_id: str) -> float:
    ranked = parts.get(chunk_id)
    return ranked.part if ranked is not None else 0.0


def _breakdown(fused: float, lex: _Ranked | None, den: _Ranked | None) -> ScoreBreakdown:
    return ScoreBreakdown(
        fused=fused,
        lexical=lex.score if lex else None,
        lexical_rank=lex.rank if lex else None,
        dense=den.score if den else None,
        dense_rank=den.rank if den else None,
    )
