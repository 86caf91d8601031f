"""Cosine search over unit vectors, restricted to allowed sources before ranking: exact, and HNSW
past ann_threshold."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from citewell.store.sqlite.vectors import VectorIndex

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


# Approximate search (HNSW) past ann_threshold --------------------------------------------------
ANN_DIM = 64
ANN_THRESHOLD = 2_000


def clustered(rng: np.random.Generator, n: int, centres: np.ndarray) -> np.ndarray:
    """Unit vectors around a few hundred centres, as real embeddings cluster by topic."""
    noise = rng.standard_normal((n, centres.shape[1])) / np.sqrt(centres.shape[1])
    return unit(centres[rng.integers(0, len(centres), n)] + noise)


@pytest.fixture
def ann_data() -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """5,000 rows in 100 sources, and 200 queries from the same distribution."""
    rng = np.random.default_rng(11)
    centres = unit(rng.standard_normal((300, ANN_DIM)))
    vectors = clustered(rng, 5_000, centres)
    keys = rng.integers(0, 100, 5_000)
    return [f"c{i}" for i in range(5_000)], keys, vectors, clustered(rng, 200, centres)


def ann_index(chunk_ids: list[str], keys: np.ndarray, vectors: np.ndarray) -> VectorIndex:
    index = VectorIndex(ANN_DIM, ann_threshold=ANN_THRESHOLD)
    index.add(chunk_ids, keys, vectors)
    assert index.wait_until_ready(60)
    assert index.approximate
    return index


def recall_at_10(
    index: VectorIndex, exact: VectorIndex, queries: np.ndarray, source_keys: set[int] | None
) -> float:
    found = 0
    for query in queries:
        got = index.search(query, source_keys=source_keys, limit=10)
        expected = exact.search(query, source_keys=source_keys, limit=10)
        found += len({hit.chunk_id for hit in got} & {hit.chunk_id for hit in expected})
    return found / (10 * len(queries))


AnnData = tuple[list[str], np.ndarray, np.ndarray, np.ndarray]


def test_below_the_threshold_search_stays_exact(ann_data: AnnData) -> None:
    chunk_ids, keys, vectors, _ = ann_data
    index = VectorIndex(ANN_DIM, ann_threshold=len(chunk_ids) + 1)
    index.add(chunk_ids, keys, vectors)
    assert index.wait_until_ready(0) and not index.approximate


def test_approximate_recall_at_10_against_exact(ann_data: AnnData) -> None:
    chunk_ids, keys, vectors, queries = ann_data
    exact = VectorIndex(ANN_DIM)
    exact.add(chunk_ids, keys, vectors)
    index = ann_index(chunk_ids, keys, vectors)
    assert recall_at_10(index, exact, queries, source_keys=None) >= 0.95
    hits = index.search(queries[0], source_keys=None, limit=100)
    assert len(hits) == 100 and len({hit.chunk_id for hit in hits}) == 100
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
    index.close()


def test_graph_built_from_small_adds_crossing_the_threshold(ann_data: AnnData) -> None:
    chunk_ids, keys, vectors, queries = ann_data
    index = VectorIndex(ANN_DIM, ann_threshold=ANN_THRESHOLD)
    for start in range(0, 5_000, 100):
        index.add(chunk_ids[start : start + 100], keys[start : start + 100], vectors[start:][:100])
    assert index.wait_until_ready(60) and index.approximate
    exact = VectorIndex(ANN_DIM)
    exact.add(chunk_ids, keys, vectors)
    assert recall_at_10(index, exact, queries, source_keys=None) >= 0.95
    index.close()


def test_restricted_approximate_search_keeps_to_the_allowed_sources(ann_data: AnnData) -> None:
    chunk_ids, keys, vectors, queries = ann_data
    index = ann_index(chunk_ids, keys, vectors)
    exact = VectorIndex(ANN_DIM)
    exact.add(chunk_ids, keys, vectors)
    allowed = set(range(0, 100, 2))  # half the rows: the graph answers, not the gather path
    by_id = dict(zip(chunk_ids, keys.tolist(), strict=True))
    for query in queries[:50]:
        hits = index.search(query, source_keys=allowed, limit=10)
        assert len(hits) == 10 and all(by_id[hit.chunk_id] in allowed for hit in hits)
    assert recall_at_10(index, exact, queries, source_keys=allowed) >= 0.95
    index.close()


def test_restricted_approximate_search_fills_the_limit_when_the_best_are_excluded() -> None:
    rng = np.random.default_rng(3)
    centres = unit(rng.standard_normal((300, ANN_DIM)))
    topic = rng.integers(0, 300, 5_000)
    vectors = unit(centres[topic] + rng.standard_normal((5_000, ANN_DIM)) / np.sqrt(ANN_DIM))
    keys = topic  # one source per topic: excluding a topic excludes all the query's neighbours
    chunk_ids = [f"c{i}" for i in range(5_000)]
    index = ann_index(chunk_ids, keys, vectors)
    query = centres[0]
    allowed = set(range(1, 300)) - set(range(100, 200))  # 2/3 of the rows, not topic 0
    hits = index.search(query, source_keys=allowed, limit=20)
    expected = brute_force(vectors, query, np.flatnonzero(np.isin(keys, list(allowed))), 20)
    assert len(hits) == 20
    assert all(int(keys[int(hit.chunk_id[1:])]) in allowed for hit in hits)
    assert len({hit.chunk_id for hit in hits} & {chunk_ids[i] for i in expected}) >= 18
    index.close()


def test_removed_sources_never_come_back(ann_data: AnnData) -> None:
    chunk_ids, keys, vectors, queries = ann_data
    index = ann_index(chunk_ids, keys, vectors)
    by_id = dict(zip(chunk_ids, keys.tolist(), strict=True))
    for removed in ({0, 1, 2}, set(range(3, 40))):  # tombstones, then past the rebuild share
        index.remove_sources(removed)
        for query in queries[:50]:
            for source_keys in (None, set(range(0, 100, 2))):
                hits = index.search(query, source_keys=source_keys, limit=30)
                assert len(hits) == 30 and not {by_id[hit.chunk_id] for hit in hits} & removed
    assert index.wait_until_ready(60) and index.approximate  # rebuilt without the tombstones
    kept = np.flatnonzero(keys >= 40)
    exact = VectorIndex(ANN_DIM)
    exact.add([chunk_ids[i] for i in kept], keys[kept], vectors[kept])
    assert len(index) == len(kept)
    assert recall_at_10(index, exact, queries, source_keys=None) >= 0.95
    index.close()


def test_rows_added_after_the_build_are_found(ann_data: AnnData) -> None:
    chunk_ids, keys, vectors, queries = ann_data
    index = ann_index(chunk_ids, keys, vectors)
    new = queries[:20]  # rows equal to queries: each must come first for its query
    index.add([f"new{i}" for i in range(20)], [500] * 20, new)

    def all_found() -> bool:
        return all(
            index.search(query, source_keys=None, limit=5)[0].chunk_id == f"new{i}"
            and index.search(query, source_keys={500}, limit=1)[0].chunk_id == f"new{i}"
            for i, query in enumerate(new)
        )

    assert all_found()  # at once, from the exact tail
    assert index.wait_until_ready(60)
    assert all_found()  # from the graph
    index.close()


def test_search_is_exact_while_the_graph_is_built(
    ann_data: AnnData, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citewell.store.sqlite import vectors as module

    chunk_ids, keys, vectors, queries = ann_data
    release = threading.Event()
    add = module._Graph.add

    def slow_add(self: module._Graph, rows: np.ndarray, ids: np.ndarray) -> None:
        release.wait(30)
        add(self, rows, ids)

    monkeypatch.setattr(module._Graph, "add", slow_add)
    index = VectorIndex(ANN_DIM, ann_threshold=ANN_THRESHOLD)
    index.add(chunk_ids, keys, vectors)
    assert not index.wait_until_ready(0.1) and not index.approximate
    for query in queries[:10]:
        hits = index.search(query, source_keys=None, limit=10)
        expected = brute_force(vectors, query, np.arange(5_000), 10)
        assert [hit.chunk_id for hit in hits] == [chunk_ids[i] for i in expected]
    release.set()
    assert index.wait_until_ready(60) and index.approximate
    index.close()


def test_close_does_not_wait_for_a_running_build(
    ann_data: AnnData, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citewell.store.sqlite import vectors as module

    chunk_ids, keys, vectors, _ = ann_data
    release, started = threading.Event(), threading.Event()
    add = module._Graph.add

    def slow_add(self: module._Graph, rows: np.ndarray, ids: np.ndarray) -> None:
        started.set()
        release.wait(30)
        add(self, rows, ids)

    monkeypatch.setattr(module._Graph, "add", slow_add)
    before = set(threading.enumerate())
    index = VectorIndex(ANN_DIM, ann_threshold=ANN_THRESHOLD)
    index.add(chunk_ids, keys, vectors)
    assert started.wait(10)
    (worker,) = set(threading.enumerate()) - before
    index.close()  # returns at once; the worker stops after its current batch
    release.set()
    worker.join(10)
    assert not worker.is_alive() and not index.approximate
    assert len(index.search(vectors[0], source_keys=None, limit=5)) == 5


def test_searches_run_while_rows_are_added_to_the_graph(ann_data: AnnData) -> None:
    chunk_ids, keys, vectors, queries = ann_data
    index = ann_index(chunk_ids[:2_500], keys[:2_500], vectors[:2_500])
    by_id = dict(zip(chunk_ids, keys.tolist(), strict=True))
    errors: list[BaseException] = []
    stop = threading.Event()

    def search(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            while not stop.is_set():
                allowed = None if rng.random() < 0.5 else set(rng.choice(100, 60).tolist())
                hits = index.search(queries[rng.integers(200)], source_keys=allowed, limit=20)
                ids = [hit.chunk_id for hit in hits]
                assert len(ids) == len(set(ids)) and 0 < len(ids) <= 20
                assert allowed is None or all(by_id[i] in allowed for i in ids)
                scores = [hit.score for hit in hits]
                assert scores == sorted(scores, reverse=True)
        except BaseException as exc:  # reported to the main thread
            errors.append(exc)

    readers = [threading.Thread(target=search, args=(seed,)) for seed in range(4)]
    for reader in readers:
        reader.start()
    for start in range(2_500, 5_000, 50):
        end = start + 50
        index.add(chunk_ids[start:end], keys[start:end], vectors[start:end])
        if start % 1_000 == 0:
            index.remove_sources({start // 1_000})
    assert index.wait_until_ready(60)
    stop.set()
    for reader in readers:
        reader.join()
    assert errors == []
    index.close()


def test_close_waits_for_the_worker_to_leave_a_build() -> None:
    """A process that exits while the worker is inside faiss can abort ("terminate called
    without an active exception"), so close() returns only once the worker has stopped."""
    earlier = set(threading.enumerate())
    index = VectorIndex(384, ann_threshold=1_000, threads=1)
    rows = np.random.default_rng(0).standard_normal((40_000, 384)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    index.add([str(i) for i in range(len(rows))], np.arange(len(rows)) // 100, rows)
    assert not index.wait_until_ready(timeout=0.5)  # the build is under way
    index.close()
    assert set(threading.enumerate()) - earlier == set()
