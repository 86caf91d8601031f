"""Exact cosine search over unit vectors, restricted to allowed sources before ranking."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from citewell.store.vectors import VectorIndex

DIM = 16


def unit(rows: np.ndarray) -> np.ndarray:
    out: np.ndarray = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    return out


@pytest.fixture
def data() -> tuple[list[str], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    vectors = unit(rng.standard_normal((500, DIM)))
    keys = rng.integers(0, 20, 500)
    return [f"c{i}" for i in range(500)], keys, vectors


def brute_force(vectors: np.ndarray, query: np.ndarray, rows: np.ndarray, k: int) -> list[int]:
    scores = vectors[rows] @ query
    return [int(row) for row in rows[np.argsort(-scores, kind="stable")[:k]]]


def test_top_k_equals_brute_force(data: tuple[list[str], np.ndarray, np.ndarray]) -> None:
    chunk_ids, keys, vectors = data
    index = VectorIndex(DIM)
    index.add(chunk_ids, keys, vectors)
    rng = np.random.default_rng(1)
    for query in unit(rng.standard_normal((10, DIM))):
        hits = index.search(query, source_keys=None, limit=25)
        expected = brute_force(vectors, query, np.arange(500), 25)
        assert [hit.chunk_id for hit in hits] == [chunk_ids[i] for i in expected]
        assert [hit.score for hit in hits] == pytest.approx((vectors[expected] @ query).tolist())


@pytest.mark.parametrize("allowed", [{3}, {0, 5, 9}, set(range(15))])
def test_restricted_top_k_equals_brute_force_over_the_allowed_rows(
    data: tuple[list[str], np.ndarray, np.ndarray], allowed: set[int]
) -> None:
    chunk_ids, keys, vectors = data
    index = VectorIndex(DIM)
    index.add(chunk_ids, keys, vectors)
    query = vectors[42]
    hits = index.search(query, source_keys=allowed, limit=10)
    expected = brute_force(vectors, query, np.flatnonzero(np.isin(keys, list(allowed))), 10)
    assert [hit.chunk_id for hit in hits] == [chunk_ids[i] for i in expected]


def test_restriction_applies_before_top_k() -> None:
    index = VectorIndex(2)
    best, worst = np.array([[1.0, 0.0]], np.float32), np.array([[-1.0, 0.0]], np.float32)
    index.add([f"top{i}" for i in range(50)], [1] * 50, np.repeat(best, 50, axis=0))
    index.add(["low"], [2], worst)
    hits = index.search(best[0], source_keys={2}, limit=1)
    assert [(hit.chunk_id, hit.score) for hit in hits] == [("low", -1.0)]
    assert index.search(best[0], source_keys=np.array([2, 3]), limit=5)[0].chunk_id == "low"
    assert index.search(best[0], source_keys=set(), limit=5) == []
    assert index.search(best[0], source_keys={99}, limit=5) == []


def test_remove_sources(data: tuple[list[str], np.ndarray, np.ndarray]) -> None:
    chunk_ids, keys, vectors = data
    index = VectorIndex(DIM)
    index.add(chunk_ids, keys, vectors)
    index.remove_sources({0, 1, 2})
    kept = np.flatnonzero(~np.isin(keys, [0, 1, 2]))
    assert len(index) == len(kept)
    hits = index.search(vectors[0], source_keys=None, limit=500)
    assert sorted(hit.chunk_id for hit in hits) == sorted(chunk_ids[i] for i in kept)
    index.remove_sources({12345})  # unknown sources: nothing happens
    assert len(index) == len(kept)


def test_adds_after_removal_are_searchable(data: tuple[list[str], np.ndarray, np.ndarray]) -> None:
    chunk_ids, keys, vectors = data
    index = VectorIndex(DIM)
    index.add(chunk_ids, keys, vectors)
    index.remove_sources(set(range(20)))
    assert len(index) == 0
    index.add(["again"], [4], vectors[:1])
    assert [hit.chunk_id for hit in index.search(vectors[0], source_keys={4}, limit=3)] == ["again"]


def test_growth_across_many_adds_keeps_every_row(
    data: tuple[list[str], np.ndarray, np.ndarray],
) -> None:
    chunk_ids, keys, vectors = data
    index = VectorIndex(DIM)
    many_ids = [f"{cid}-{round_}" for round_ in range(10) for cid in chunk_ids]
    for round_ in range(10):
        for start in range(0, 500, 7):
            end = min(start + 7, 500)
            index.add(
                many_ids[round_ * 500 + start : round_ * 500 + end],
                keys[start:end],
                vectors[start:end],
            )
    assert len(index) == 5000
    hits = index.search(vectors[123], source_keys=None, limit=10)
    assert {hit.chunk_id for hit in hits} == {f"c123-{round_}" for round_ in range(10)}
    assert hits[0].score == pytest.approx(1.0)


def test_empty_index_and_empty_add() -> None:
    index = VectorIndex(DIM)
    index.add([], [], np.empty((0, DIM), np.float32))
    assert len(index) == 0
    assert index.search(np.ones(DIM, np.float32), source_keys=None, limit=5) == []


def test_wrong_shapes_are_rejected() -> None:
    index = VectorIndex(DIM)
    with pytest.raises(ValueError):
        index.add(["a"], [1], np.ones((1, DIM + 1), np.float32))
    with pytest.raises(ValueError):
        index.add(["a", "b"], [1], np.ones((2, DIM), np.float32))
    with pytest.raises(ValueError):
        index.search(np.ones(DIM + 1, np.float32), source_keys=None, limit=5)


def test_searches_run_while_vectors_are_added_and_removed(
    data: tuple[list[str], np.ndarray, np.ndarray],
) -> None:
    chunk_ids, keys, vectors = data
    index = VectorIndex(DIM)
    index.add(chunk_ids[:100], keys[:100], vectors[:100])
    errors: list[BaseException] = []
    stop = threading.Event()

    def search() -> None:
        try:
            while not stop.is_set():
                hits = index.search(vectors[5], source_keys=None, limit=3)
                assert hits[0].chunk_id == "c5"
        except BaseException as exc:  # reported to the main thread
            errors.append(exc)

    readers = [threading.Thread(target=search) for _ in range(3)]
    for reader in readers:
        reader.start()
    for start in range(100, 500, 10):
        index.add(
            chunk_ids[start : start + 10], keys[start : start + 10], vectors[start : start + 10]
        )
        if start % 100 == 0:
            index.remove_sources({int(keys[start])} - {int(keys[5])})
    stop.set()
    for reader in readers:
        reader.join()
    assert errors == []
