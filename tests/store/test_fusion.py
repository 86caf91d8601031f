"""Fusion of a lexical and a dense ranking: exact scores for small inputs."""

from __future__ import annotations

import pytest

from citewell.store.base import ChunkHit, Fusion
from citewell.store.fusion import fuse

LEX = [ChunkHit("a", 9.0), ChunkHit("b", 5.0), ChunkHit("c", 1.0)]
DENSE = [ChunkHit("b", 0.9), ChunkHit("d", 0.8), ChunkHit("a", 0.4)]


def test_rrf_scores_are_weighted_reciprocal_ranks_rescaled_to_one() -> None:
    fusion = Fusion(method="rrf", lexical_weight=0.5, rrf_k=1)
    hits = fuse(LEX, DENSE, fusion, limit=10)
    # raw: a = .5/2 + .5/4 = .375; b = .5/3 + .5/2 = .41667; c = .5/4 = .125; d = .5/3 = .16667
    # best achievable = .5/2 + .5/2 = .5
    assert [h.chunk_id for h in hits] == ["b", "a", "d", "c"]
    fused = {h.chunk_id: h.scores.fused for h in hits}
    assert fused == pytest.approx({"b": 5 / 6, "a": 0.75, "d": 1 / 3, "c": 0.25})


def test_rrf_reports_each_retrievers_score_and_rank() -> None:
    hits = {h.chunk_id: h.scores for h in fuse(LEX, DENSE, Fusion(rrf_k=1), limit=10)}
    assert (hits["a"].lexical, hits["a"].lexical_rank) == (9.0, 1)
    assert (hits["a"].dense, hits["a"].dense_rank) == (0.4, 3)
    assert (hits["c"].dense, hits["c"].dense_rank) == (None, None)
    assert (hits["d"].lexical, hits["d"].lexical_rank) == (None, None)


def test_rrf_weight_shifts_the_order_towards_the_weighted_list() -> None:
    fusion = Fusion(method="rrf", lexical_weight=0.9, rrf_k=1)
    # a = .9/2 + .1/4 = .475; b = .9/3 + .1/2 = .35
    hits = fuse(LEX, DENSE, fusion, limit=2)
    assert [h.chunk_id for h in hits] == ["a", "b"]
    assert hits[0].scores.fused == pytest.approx(0.475 / 0.5)


def test_a_hit_first_in_both_lists_scores_exactly_one() -> None:
    for method in ("rrf", "convex"):
        fusion = Fusion(method=method, lexical_weight=0.3, rrf_k=60)
        hits = fuse([ChunkHit("x", 3.0), ChunkHit("y", 1.0)], [ChunkHit("x", 0.7)], fusion, limit=5)
        assert hits[0].chunk_id == "x"
        assert hits[0].scores.fused == 1.0


def test_convex_scores_are_weighted_min_max_normalised_scores() -> None:
    fusion = Fusion(method="convex", lexical_weight=0.25)
    hits = fuse(LEX, DENSE, fusion, limit=10)
    # lexical normalised: a 1, b .5, c 0; dense normalised: b 1, d .8, a 0
    # a = .25; b = .125 + .75 = .875; c = 0; d = .6
    assert [h.chunk_id for h in hits] == ["b", "d", "a", "c"]
    fused = {h.chunk_id: h.scores.fused for h in hits}
    assert fused == pytest.approx({"a": 0.25, "b": 0.875, "c": 0.0, "d": 0.6})


def test_convex_counts_a_single_hit_or_equal_scores_as_the_best() -> None:
    fusion = Fusion(method="convex", lexical_weight=0.5)
    hits = fuse([ChunkHit("a", 2.0)], [ChunkHit("a", 0.3), ChunkHit("b", 0.3)], fusion, limit=5)
    assert [(h.chunk_id, h.scores.fused) for h in hits] == [("a", 1.0), ("b", 0.5)]


def test_ties_are_broken_by_chunk_id() -> None:
    lexical = [ChunkHit("q", 2.0), ChunkHit("p", 1.0)]
    dense = [ChunkHit("p", 0.9), ChunkHit("q", 0.1)]
    hits = fuse(lexical, dense, Fusion(method="rrf", lexical_weight=0.5), limit=5)
    assert [h.chunk_id for h in hits] == ["p", "q"]
    assert hits[0].scores.fused == hits[1].scores.fused


@pytest.mark.parametrize("method", ["rrf", "convex"])
@pytest.mark.parametrize("weight", [0.0, 0.5, 1.0])
def test_with_one_list_empty_fusion_keeps_the_other_lists_order(method: str, weight: float) -> None:
    fusion = Fusion(method=method, lexical_weight=weight, rrf_k=60)  # type: ignore[arg-type]
    for lexical, dense in ((LEX, []), ([], DENSE)):
        hits = fuse(lexical, dense, fusion, limit=10)
        assert [h.chunk_id for h in hits] == [h.chunk_id for h in (lexical or dense)]
        assert hits[0].scores.fused == 1.0


def test_rrf_single_list_scores_are_rank_ratios() -> None:
    hits = fuse([], DENSE, Fusion(method="rrf", lexical_weight=0.5, rrf_k=60), limit=10)
    assert [h.scores.fused for h in hits] == pytest.approx([1.0, 61 / 62, 61 / 63])


def test_limit_and_empty_inputs() -> None:
    assert fuse([], [], Fusion(), limit=10) == []
    assert fuse(LEX, DENSE, Fusion(), limit=0) == []
    assert len(fuse(LEX, DENSE, Fusion(), limit=2)) == 2


def test_a_chunk_listed_twice_keeps_its_first_rank() -> None:
    hits = fuse([ChunkHit("a", 3.0), ChunkHit("b", 2.0), ChunkHit("a", 1.0)], [], Fusion(), limit=5)
    assert [(h.chunk_id, h.scores.lexical_rank) for h in hits] == [("a", 1), ("b", 2)]
