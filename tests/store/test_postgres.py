"""What only the PostgreSQL store shows: fusion and BM25 in SQL agree with the embedded store's,
migrations upgrade in place once even when processes start together, and a source is written in
one transaction (the contract itself runs in test_store.py)."""

from __future__ import annotations

import textwrap
import threading
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
from tests.contracts.store import DIM, EMBEDDER, LOCAL, draft, kill_when_blocked, vector_for

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


def fill_common(into: SQLiteStore | PostgresStore, bucket_name: str = "reports") -> Scope:
    """400 chunks of common words; every 37th also names an okapi, each chunk a different length
    (so scores differ: no ties to order)."""
    bucket = into.create_bucket(bucket_name, tenant_id="default").id
    for n in range(20):
        lines = []
        for g in range(n * 20, n * 20 + 20):
            animal = "okapi" if g % 37 == 0 else ["zebra", "camel", "horse"][g % 3]
            lines.append(f"The report of the year {g} names the {animal}" + " again" * (g % 11))
        into.add_source(draft(bucket, f"{n}.txt", "\n".join(lines)))
    return Scope(principal=LOCAL, bucket_ids=(bucket,))


@pytest.mark.parametrize("query", ["report", "the report of the okapi", "okapi again"])
def test_lexical_search_reading_each_terms_best_postings_finds_the_exact_best(
    database_url: str, tmp_path: Path, query: str
) -> None:
    # "report" is held by all 400 chunks, "again" by 360, "okapi" by 11: each term's 20
    # postings that add most to a chunk's score, and the chunks they reach scored exactly, find
    # what scoring every chunk holding a query term finds (chunks of equal score either way).
    store = open_store(database_url, tmp_path, lexical_depth=20)
    exact = open_store(database_url, tmp_path, lexical_depth=None)
    try:
        scope = fill_common(store)
        found = store.search_lexical(query, scope, limit=5)
        assert len(found) == 5
        assert [h.score for h in found] == [
            h.score for h in exact.search_lexical(query, scope, limit=5)
        ]
    finally:
        exact.close()
        store.close()


def test_the_depth_grows_with_the_library(database_url: str, tmp_path: Path) -> None:
    # 400 chunks: a share of 0.05 of them is 20 postings per term, which finds the exact best
    # (as a depth of 20 does, above); the depth of 2 alone reaches too few chunks to fill 5.
    fixed = open_store(database_url, tmp_path, lexical_depth=2, lexical_share=0.0)
    growing = open_store(database_url, tmp_path, lexical_depth=2, lexical_share=0.05)
    exact = open_store(database_url, tmp_path, lexical_depth=None)
    try:
        scope = fill_common(fixed)
        query = "the report of the okapi"
        best = [h.score for h in exact.search_lexical(query, scope, limit=5)]
        assert [h.score for h in fixed.search_lexical(query, scope, limit=5)] != best
        assert [h.score for h in growing.search_lexical(query, scope, limit=5)] == best
        fusion = Fusion(method="rrf", lexical_weight=1.0, rrf_k=60, candidates=5)
        vector = vector_for("the report of the okapi")
        hybrid = growing.search_hybrid(query, vector, scope, limit=5, fusion=fusion)
        assert [h.chunk_id for h in hybrid] == [
            h.chunk_id for h in exact.search_hybrid(query, vector, scope, limit=5, fusion=fusion)
        ]
    finally:
        for store in (exact, growing, fixed):
            store.close()


def test_a_term_held_by_fewer_chunks_than_the_depth_leaves_its_share_to_the_others(
    database_url: str, tmp_path: Path
) -> None:
    # A depth of 10 for two terms is 20 postings: "okapi" is held by one chunk, so "camel"
    # reads 19 of its 30, and the 15 best chunks are all among those read. Read 10 apiece,
    # only 11 chunks would be reached.
    store = open_store(database_url, tmp_path, lexical_depth=10)
    exact = open_store(database_url, tmp_path, lexical_depth=None)
    try:
        bucket = store.create_bucket("desert", tenant_id="default").id
        lines = ["the okapi"] + [f"the camel{' walks' * n}" for n in range(30)]
        store.add_source(draft(bucket, "desert.txt", "\n".join(lines)))
        scope = Scope(principal=LOCAL, bucket_ids=(bucket,))
        found = store.search_lexical("okapi camel", scope, limit=15)
        assert [h.score for h in found] == [
            h.score for h in exact.search_lexical("okapi camel", scope, limit=15)
        ]
        chunks = store.get_chunks([h.chunk_id for h in found])
        assert [chunks[h.chunk_id].text for h in found] == lines[:15]
    finally:
        exact.close()
        store.close()


def test_lexical_search_fills_its_list_from_the_scope_when_the_best_postings_are_not_its(
    database_url: str, tmp_path: Path
) -> None:
    store = open_store(database_url, tmp_path, lexical_depth=3)
    try:
        # Another bucket's chunks are the shortest: the word adds most to them.
        other = store.create_bucket("short", tenant_id="default").id
        for n in range(5):
            store.add_source(draft(other, f"{n}.txt", f"okapi\nokapi {n}"))
        ours = fill_common(store)
        found = store.search_lexical("okapi", ours, limit=3)
        assert len(found) == 3
        sources = {s.id for s in store.list_sources(ours.bucket_ids[0])}
        chunks = store.get_chunks([h.chunk_id for h in found])
        assert {chunks[h.chunk_id].source_id for h in found} <= sources
    finally:
        store.close()


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


def _postings(url: str) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """The kept lexical postings, and the same made afresh from the chunks, each impact with its
    field's recorded average length."""
    with psycopg.connect(url) as conn:
        kept = conn.execute(
            "SELECT term, chunk_key, source_key, occurrences, impact FROM lexical_postings"
            " ORDER BY 1, 2"
        ).fetchall()
        made = conn.execute(
            "SELECT hashtextextended(u.lexeme, 0), c.key, c.source_key, cardinality(u.positions),"
            " bm25_impact(cardinality(u.positions), c.lexical_length, f.impact_length)::real"
            " FROM chunks c JOIN lexical_fields f ON f.field = c.lexical_field,"
            " unnest(c.lexemes) u ORDER BY 1, 2"
        ).fetchall()
    return kept, made


def test_lexical_postings_follow_every_write_and_search_stays_exact(
    database_url: str, tmp_path: Path
) -> None:
    store = open_store(database_url, tmp_path, lexical_depth=20)
    exact = open_store(database_url, tmp_path, lexical_depth=None)
    queries = ["report okapi", "the year of the zebra", "again and again", "refunds"]
    try:
        scope = fill_common(store)
        bucket = scope.bucket_ids[0]

        def agree() -> None:
            kept, made = _postings(database_url)
            assert kept == made
            for query in queries:
                assert [h.score for h in store.search_lexical(query, scope, limit=5)] == [
                    h.score for h in exact.search_lexical(query, scope, limit=5)
                ]

        agree()
        for source in store.list_sources(bucket)[::3]:
            store.delete_source(source.id)
        agree()
        store.add_source(draft(bucket, "new.txt", "Refunds of the okapi report.\nAgain: refunds."))
        agree()
        store.delete_bucket(bucket)
        assert _postings(database_url) == ([], [])
    finally:
        exact.close()
        store.close()


def test_the_postings_migration_indexes_a_library_written_before_it(
    database_url: str, tmp_path: Path
) -> None:
    store = open_store(database_url, tmp_path, lexical_depth=20)
    scope = fill_common(store)
    store.close()
    with psycopg.connect(database_url) as conn:  # the database as it was before 0004
        conn.execute(
            "DROP TABLE lexical_postings; DROP FUNCTION bm25_impact;"
            " ALTER TABLE lexical_fields DROP COLUMN impact_length;"
            " DELETE FROM schema_migrations WHERE name = '0004_lexical_postings'"
        )
    store = open_store(database_url, tmp_path, lexical_depth=20)
    exact = open_store(database_url, tmp_path, lexical_depth=None)
    try:
        kept, made = _postings(database_url)
        assert kept == made and len(kept) > 400
        for query in ["report okapi", "again"]:
            assert [h.score for h in store.search_lexical(query, scope, limit=5)] == [
                h.score for h in exact.search_lexical(query, scope, limit=5)
            ]
    finally:
        exact.close()
        store.close()


def _impact_length(url: str) -> float:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT impact_length FROM lexical_fields WHERE field = 'text_en'")
        found = row.fetchone()
    assert found is not None
    return float(found[0])


def test_impacts_are_computed_again_when_the_average_length_drifts(
    store: PostgresStore, database_url: str
) -> None:
    bucket = store.create_bucket("notes", tenant_id="default").id
    store.add_source(draft(bucket, "short.txt", "\n".join(f"Refund {n} paid." for n in range(10))))
    first = _impact_length(database_url)
    assert first == pytest.approx(3.0)  # "refund", the number and "paid"
    # One more chunk of 4 terms: the average moves 3 -> 3.09, within 10%: kept.
    store.add_source(draft(bucket, "one.txt", "Refund 11 paid twice."))
    assert _impact_length(database_url) == first
    kept, made = _postings(database_url)
    assert kept == made
    # Ten chunks of 12 terms: the average doubles, and every impact follows it.
    long = "Refund {} paid by the shop to the customer who returned the broken bicycle bell."
    store.add_source(draft(bucket, "long.txt", "\n".join(long.format(n) for n in range(10))))
    assert _impact_length(database_url) > 2 * first
    kept, made = _postings(database_url)
    assert kept == made


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
# and says so on its stdout; the test kills it there with SIGKILL.
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
        print("blocked", flush=True)
        time.sleep(600)

    postgres.count_terms = block
    store.add_source(draft(bucket, "doc-1.txt", f"Document 2.\\n{lines}"))
    """
)


@pytest.mark.slow
def test_a_process_killed_mid_write_leaves_no_half_visible_source(
    database_url: str, tmp_path: Path
) -> None:
    kill_when_blocked(_INGEST_AND_BLOCK, database_url, str(tmp_path))
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
