"""What only the PostgreSQL store shows: fusion and BM25 in SQL agree with the embedded store's,
migrations upgrade in place once even when processes start together, and a source is written in
one transaction (the contract itself runs in test_store.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg import sql

from citewell.model import Comparison, Principal
from citewell.store.base import Fusion, Scope
from citewell.store.fusion import fuse
from citewell.store.postgres import PostgresStore
from citewell.store.postgres import schema as postgres_schema
from citewell.store.sqlite import SQLiteStore
from tests.contracts.store import DIM, EMBEDDER, LOCAL, draft, vector_for

pytestmark = pytest.mark.integration

LINES = [
    "Refunds are available within 30 days of purchase.",
    "Refunds of damaged goods are paid within 5 days, refunds of others within 30.",
    "The museum opens at 9am every day except Monday.",
    "Puede solicitar un reembolso dentro de los 30 días tras la compra.",
    "El museo abre a las nueve de la mañana todos los días.",
    "客户可以在购买后三十天内申请退款，退款期限为三十天。",
    "博物馆每天上午九点开门，周一除外。",
    "Shipping is free above fifty euros; returns ship free too.",
]
LANGUAGES = ["en", "en", "en", "es", "es", "zh", "zh", "en"]


def open_store(url: str, folder: Path, **options: object) -> PostgresStore:
    return PostgresStore(url, folder, embedder=EMBEDDER, dim=DIM, **options)  # type: ignore[arg-type]


def fill(store: SQLiteStore | PostgresStore) -> Scope:
    """Each line a source in its language; the scope of their bucket."""
    bucket = store.create_bucket("mixed", tenant_id="default").id
    for index, (line, language) in enumerate(zip(LINES, LANGUAGES, strict=True)):
        store.add_source(draft(bucket, f"{index}.txt", line, language=language))
    return Scope(principal=LOCAL, bucket_ids=(bucket,))


@pytest.fixture
def store(database_url: str, tmp_path: Path):
    opened = open_store(database_url, tmp_path)
    yield opened
    opened.close()


@pytest.mark.parametrize("query", ["refund window", "reembolsos", "退款期限", "museum 9am", "free"])
def test_lexical_scores_are_the_embedded_stores_bm25(
    store: PostgresStore, tmp_path: Path, query: str
) -> None:
    embedded = SQLiteStore(tmp_path / "embedded", embedder=EMBEDDER, dim=DIM)
    try:
        ours, theirs = fill(store), fill(embedded)
        found = store.search_lexical(query, ours, limit=10)
        assert found
        expected = embedded.search_lexical(query, theirs, limit=10)
        texts = store.get_chunks([h.chunk_id for h in found])
        expected_texts = embedded.get_chunks([h.chunk_id for h in expected])
        assert [texts[h.chunk_id].text for h in found] == [
            expected_texts[h.chunk_id].text for h in expected
        ]
        assert [h.score for h in found] == pytest.approx([h.score for h in expected], rel=1e-5)
    finally:
        embedded.close()


def _lexical_was_pruned(
    store: PostgresStore, url: str, scope: Scope, query: str, limit: int
) -> bool:
    """Whether a lexical search answered from the chunks holding its rare terms alone (the
    plan's branch that scores every chunk never ran)."""
    search = store._search(scope, query=query)
    statement = sql.SQL(
        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) WITH {}, {} SELECT id FROM lexical"
    ).format(search.allowed, search.lexical(limit))
    with psycopg.connect(url) as conn:
        plan = [row[0] for row in conn.execute(statement, search.params)]
    gate = next(i for i, line in enumerate(plan) if "One-Time Filter: (NOT" in line)
    scoring = next(line for line in plan[gate:] if "->  Limit" in line)
    return "(never executed)" in scoring


def test_lexical_search_scores_only_the_chunks_of_rare_terms_when_that_is_provably_exact(
    store: PostgresStore, database_url: str, tmp_path: Path
) -> None:
    # 400 chunks of common words; every 37th also names an okapi, each of those a different
    # length (so scores differ: no ties to order).
    def fill_common(into: SQLiteStore | PostgresStore) -> Scope:
        bucket = into.create_bucket("reports", tenant_id="default").id
        for n in range(20):
            lines = []
            for g in range(n * 20, n * 20 + 20):
                animal = "okapi" if g % 37 == 0 else ["zebra", "camel", "horse"][g % 3]
                lines.append(f"The report of the year {g} names the {animal}" + " again" * (g % 11))
            into.add_source(draft(bucket, f"{n}.txt", "\n".join(lines)))
        return Scope(principal=LOCAL, bucket_ids=(bucket,))

    embedded = SQLiteStore(tmp_path / "embedded", embedder=EMBEDDER, dim=DIM)
    try:
        ours, theirs = fill_common(store), fill_common(embedded)
        for query, limit, pruned, compared in [
            ("the report of the okapi", 5, True, 5),  # 11 chunks hold "okapi"
            ("the report of the okapi", 20, False, 11),  # more than they: every chunk scored
        ]:
            assert _lexical_was_pruned(store, database_url, ours, query, limit) is pruned
            found = store.search_lexical(query, ours, limit=limit)
            assert len(found) == limit
            expected = embedded.search_lexical(query, theirs, limit=limit)[:compared]
            texts = store.get_chunks([h.chunk_id for h in found])
            expected_texts = embedded.get_chunks([h.chunk_id for h in expected])
            assert [(texts[h.chunk_id].text, h.score) for h in found[:compared]] == [
                (expected_texts[h.chunk_id].text, pytest.approx(h.score, rel=1e-5))
                for h in expected
            ]
    finally:
        embedded.close()


@pytest.mark.parametrize(
    "fusion",
    [
        Fusion(method="rrf", lexical_weight=0.5, rrf_k=60),
        Fusion(method="rrf", lexical_weight=0.9, rrf_k=1, candidates=3),
        Fusion(method="convex", lexical_weight=0.7),
        Fusion(method="convex", lexical_weight=0.25, candidates=2),
    ],
)
@pytest.mark.parametrize("query", ["refunds within 30 days", "the of and", "退款"])
def test_hybrid_search_is_the_fusion_of_both_searches(
    store: PostgresStore, fusion: Fusion, query: str
) -> None:
    scope = fill(store)
    vector = vector_for(LINES[1])
    lexical = store.search_lexical(query, scope, limit=fusion.candidates)
    dense = store.search_dense(vector, scope, limit=fusion.candidates)
    hits = store.search_hybrid(query, vector, scope, limit=5, fusion=fusion)
    assert hits == fuse(lexical, dense, fusion, limit=5)


def test_hybrid_search_applies_the_acl_to_both_lists(store: PostgresStore) -> None:
    bucket = store.create_bucket("hr", tenant_id="default").id
    store.add_source(draft(bucket, "secret.txt", "Salary bands are secret.", acl=frozenset({"hr"})))
    store.add_source(draft(bucket, "open.txt", "Salary is paid monthly."))
    outsider = Scope(principal=Principal(acl_labels=frozenset({"sales"})), bucket_ids=(bucket,))
    hits = store.search_hybrid(
        "salary bands secret",
        vector_for("Salary bands are secret."),
        outsider,
        limit=10,
        fusion=Fusion(),
    )
    chunks = store.get_chunks([h.chunk_id for h in hits])
    assert [chunks[h.chunk_id].text for h in hits] == ["Salary is paid monthly."]


def test_processes_starting_together_apply_each_migration_once(
    database_url: str, tmp_path: Path
) -> None:
    opened: list[PostgresStore] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            opened.append(open_store(database_url, tmp_path))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in opened:
        store.close()
    assert errors == []
    with psycopg.connect(database_url) as conn:
        names = [row[0] for row in conn.execute("SELECT name FROM schema_migrations ORDER BY 1")]
    assert names == [name for name, _ in postgres_schema.MIGRATIONS]


def test_a_new_migration_upgrades_a_database_in_place(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(database_url, tmp_path)
    bucket = store.create_bucket("notes", tenant_id="default").id
    source = store.add_source(draft(bucket, "a.txt", "Refunds take 30 days."))
    store.close()
    later = ("9999_test_column", "ALTER TABLE sources ADD COLUMN test_column integer;")
    monkeypatch.setattr(postgres_schema, "MIGRATIONS", (*postgres_schema.MIGRATIONS, later))
    reopened = open_store(database_url, tmp_path)
    try:
        assert reopened.get_source(source.id) == source
        with psycopg.connect(database_url) as conn:
            applied = conn.execute("SELECT name FROM schema_migrations ORDER BY 1").fetchall()
            conn.execute("SELECT test_column FROM sources")
        assert applied[-1] == ("9999_test_column",)
    finally:
        reopened.close()


def _bm25_statistics(url: str) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """The kept term and field counts, and the same counted afresh from the chunks."""
    with psycopg.connect(url) as conn:
        kept = (
            conn.execute("SELECT lexeme, chunks FROM lexical_terms ORDER BY 1").fetchall()
            + conn.execute(
                "SELECT field, chunks, terms FROM lexical_fields WHERE chunks > 0 ORDER BY 1"
            ).fetchall()
        )
        counted = (
            conn.execute(
                "SELECT u.lexeme, count(*) FROM chunks c, unnest(c.lexemes) u GROUP BY 1 ORDER BY 1"
            ).fetchall()
            + conn.execute(
                "SELECT lexical_field, count(*), sum(lexical_length) FROM chunks"
                " GROUP BY 1 ORDER BY 1"
            ).fetchall()
        )
    return kept, counted


def test_bm25_statistics_follow_every_write(store: PostgresStore, database_url: str) -> None:
    scope = fill(store)
    first = store.list_sources(scope.bucket_ids[0])[0]
    store.delete_source(first.id)
    store.add_source(draft(scope.bucket_ids[0], "new.txt", "Refunds, refunds and refunds."))
    kept, counted = _bm25_statistics(database_url)
    assert kept == counted
    store.delete_bucket(scope.bucket_ids[0])
    assert _bm25_statistics(database_url) == ([], [])


def test_a_failed_write_leaves_nothing_behind(
    store: PostgresStore, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = store.create_bucket("notes", tenant_id="default").id
    kept = store.add_source(draft(bucket, "a.txt", "Refunds take 30 days."))
    before = _bm25_statistics(database_url)

    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr("citewell.store.postgres.store.count_terms", fail)
    failed = draft(bucket, "a.txt", "Refunds take 60 days.\nShipping is free.")
    with pytest.raises(RuntimeError):
        store.add_source(failed)
    monkeypatch.undo()
    assert store.list_sources(bucket, include_superseded=True) == [kept]
    assert store.get_source(kept.id).superseded_by is None
    assert _bm25_statistics(database_url) == before
    assert not store.blobs.exists(failed.content_hash)
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM chunks").fetchone() == (1,)
        assert conn.execute("SELECT count(*) FROM vectors").fetchone() == (1,)


# The child stores two sources, then blocks inside the transaction of the third (its last step)
# and signals the test through a marker file; the test kills it there with SIGKILL.
_INGEST_AND_BLOCK = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from citewell.store.postgres import store as postgres
    from tests.contracts.store import DIM, EMBEDDER, draft

    url, folder = sys.argv[1], Path(sys.argv[2])
    store = postgres.PostgresStore(url, folder, embedder=EMBEDDER, dim=DIM)
    bucket = store.create_bucket("notes", tenant_id="default").id
    lines = "\\n".join(f"Line {i} about refunds and shipping." for i in range(300))
    for n in range(2):
        store.add_source(draft(bucket, f"doc-{n}.txt", f"Document {n}.\\n{lines}"))

    def block(*args, **kwargs):
        (folder / "blocked").touch()
        time.sleep(600)

    postgres.count_terms = block
    store.add_source(draft(bucket, "doc-1.txt", f"Document 2.\\n{lines}"))
    """
)


@pytest.mark.slow
def test_a_process_killed_mid_write_leaves_no_half_visible_source(
    database_url: str, tmp_path: Path
) -> None:
    repo = Path(__file__).resolve().parents[2]
    child = subprocess.Popen(
        [sys.executable, "-c", _INGEST_AND_BLOCK, database_url, str(tmp_path)],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "blocked").exists():
            assert child.poll() is None, "the writing process ended before blocking"
            assert time.monotonic() < deadline, "the writing process never blocked"
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait()
    store = open_store(database_url, tmp_path)
    try:
        bucket = store.get_bucket("notes", tenant_id="default").id
        sources = store.list_sources(bucket, include_superseded=True)
        assert sorted((s.filename, s.version, s.superseded_by) for s in sources) == [
            ("doc-0.txt", 1, None),
            ("doc-1.txt", 1, None),
        ]
        scope = Scope(principal=LOCAL, bucket_ids=(bucket,))
        assert len(store.search_lexical("refunds", scope, limit=10_000)) == 2 * 300
        kept, counted = _bm25_statistics(database_url)
        assert kept == counted
        # And the store takes the new version again.
        store.add_source(draft(bucket, "doc-1.txt", "Document 2 again."))
        assert [s.version for s in store.list_sources(bucket)] == [1, 2]
    finally:
        store.close()


def _dense_plan(store: PostgresStore, url: str, scope: Scope) -> str:
    """The plan of a dense search, steered as the store steers it."""
    search = store._search(scope, vector=vector_for("x"))
    query = sql.SQL("EXPLAIN WITH {}, {} SELECT id FROM dense").format(
        search.allowed, search.dense(5)
    )
    with psycopg.connect(url) as conn:
        register_vector(conn)
        conn.execute(search.steer(store._exact_below, store._ef_search), search.params)
        return "\n".join(row[0] for row in conn.execute(query, search.params, prepare=False))


@pytest.mark.parametrize("exact_below", [0, 10_000])
def test_dense_search_is_exact_below_a_scope_size_and_walks_the_index_from_it(
    database_url: str, tmp_path: Path, exact_below: int
) -> None:
    store = open_store(database_url, tmp_path, exact_below=exact_below)
    try:
        bucket = store.create_bucket("many", tenant_id="default").id
        lines = [f"Line {i} of the handbook." for i in range(60)]
        for n in range(6):  # every other file is for HR only
            text = "\n".join(lines[n * 10 : (n + 1) * 10])
            store.add_source(
                draft(bucket, f"{n}.txt", text, acl=frozenset({"hr"} if n % 2 else ()))
            )
        outsider = Scope(principal=Principal(), bucket_ids=(bucket,))
        plan = _dense_plan(store, database_url, outsider)
        assert ("vectors_hnsw" in plan) == (exact_below == 0)
        visible = [line for n in (0, 2, 4) for line in lines[n * 10 : (n + 1) * 10]]
        for line in (lines[3], lines[13]):  # a visible line, and a hidden one
            hits = store.search_dense(vector_for(line), outsider, limit=5)
            chunks = store.get_chunks([h.chunk_id for h in hits])
            expected = sorted(visible, key=lambda v: -float(vector_for(v) @ vector_for(line)))
            assert [chunks[h.chunk_id].text for h in hits] == expected[:5]
    finally:
        store.close()


def test_writers_in_parallel_sharing_texts_all_commit(
    store: PostgresStore, database_url: str
) -> None:
    bucket = store.create_bucket("shared", tenant_id="default").id
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            for n in range(5):
                # The same lines in another order each time: shared terms and vector keys.
                lines = LINES[n:] + LINES[:n] if worker % 2 else LINES[::-1][n:] + LINES[::-1][:n]
                text = "\n".join([*lines, f"Written by {worker} as {n}."])
                store.add_source(draft(bucket, f"{worker}-{n}.txt", text))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(store.list_sources(bucket)) == 20
    kept, counted = _bm25_statistics(database_url)
    assert kept == counted


def test_dense_search_of_a_small_share_of_the_store_is_exact(
    database_url: str, tmp_path: Path
) -> None:
    store = open_store(database_url, tmp_path, exact_below=0)
    try:
        bucket = store.create_bucket("many", tenant_id="default").id
        store.add_source(draft(bucket, "big.txt", "\n".join(f"Line {i}." for i in range(600))))
        store.add_source(draft(bucket, "small.txt", "\n".join(f"Note {i}." for i in range(10))))
        whole = Scope(principal=LOCAL, bucket_ids=(bucket,))
        small = Scope(
            principal=LOCAL,
            bucket_ids=(bucket,),
            filters=Comparison(type="eq", key="filename", value="small.txt"),
        )
        assert "vectors_hnsw" in _dense_plan(store, database_url, whole)
        assert "vectors_hnsw" not in _dense_plan(store, database_url, small)  # 10 of 610
    finally:
        store.close()
