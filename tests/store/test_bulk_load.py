"""A bulk load into the PostgreSQL store (``PostgresStore.bulk_load``) writes sources without the
HNSW index and builds it once at the end. Before, during and after that build the store answers
every read exactly as a store written source by source (whose index was kept up row by row)."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psycopg
import pytest

from citewell.model import Modality, Page, Principal, Span
from citewell.store.base import Fusion, Scope, SourceDraft
from citewell.store.postgres import PostgresStore
from tests.contracts.store import DIM, EMBEDDER, LOCAL, draft, vector_for

pytestmark = pytest.mark.integration

LINES = [
    ("Refunds are available within 30 days of purchase.", "en"),
    ("Refunds of damaged goods are paid within 5 days.", "en"),
    ("The museum opens at 9am every day except Monday.", "en"),
    ("Puede solicitar un reembolso dentro de los 30 días tras la compra.", "es"),
    ("El museo abre a las nueve de la mañana todos los días.", "es"),
    ("客户可以在购买后三十天内申请退款，退款期限为三十天。", "zh"),
    ("博物馆每天上午九点开门，周一除外。", "zh"),
    ("Shipping is free above fifty euros; returns ship free too.", "en"),
]
QUERIES = ["refunds within 30 days", "museo abre", "退款", "free shipping museum"]


def drafts(bucket: str) -> list[SourceDraft]:
    """Sources of several lines each, in three languages; some for HR only, one with a page and
    its boxes, and a second version of a file."""
    out = []
    for n in range(12):
        picked = [LINES[(n + k) % len(LINES)] for k in range(3)]
        language = picked[0][1]
        text = "\n".join(f"{line} ({n}.{k})" for k, (line, _) in enumerate(picked))
        source = draft(
            bucket,
            f"{n % 10}.txt",
            text,
            acl=frozenset({"hr"}) if n % 4 == 3 else frozenset(),
            metadata={"n": n},
            language=language,
        )
        out.append(dataclasses.replace(source, id=f"src_{n:02d}"))
    text = out[0].text
    out[0] = dataclasses.replace(
        out[0],
        pages=(
            Page(
                number=1,
                label="1",
                span=Span(start=0, end=len(text)),
                width=600,
                height=800,
                modality=Modality.IMAGE,
                ocr_confidence=90.0,
            ),
        ),
        char_boxes=(np.arange(len(text) * 4, dtype=np.float32).reshape(-1, 4),),
        char_confidences=(np.full(len(text), 90, dtype=np.uint8),),
    )
    return out


def reads(store: PostgresStore, bucket: str) -> list[object]:
    """Everything a store answers about the sources above, exact scores included (the bucket's
    id, and when each source was written, apart)."""
    sources = store.list_sources(bucket, include_superseded=True)
    found: list[object] = [s.model_dump(exclude={"bucket_id", "created_at"}) for s in sources]
    for source in sources:
        found += [
            store.source_text(source.id),
            store.source_pages(source.id),
            store.original(source.id),
            store.get_chunks([f"chk_{source.id.removeprefix('src_')}_{i}" for i in range(3)]),
        ]
    found.append(store.char_boxes("src_00", 1).tolist())
    for principal in (LOCAL, Principal()):
        scope = Scope(principal=principal, bucket_ids=(bucket,))
        for query in QUERIES:
            vector = vector_for(query)
            found += [
                store.search_lexical(query, scope, limit=10),
                store.search_dense(vector, scope, limit=10),
                store.search_hybrid(query, vector, scope, limit=10, fusion=Fusion(candidates=20)),
            ]
    return found


def exact_dense(store: PostgresStore, bucket: str, query: str) -> list[str]:
    """The ids of the 10 chunks nearest to the query, every one compared (numpy)."""
    chunks = [
        (f"chk_{s.id.removeprefix('src_')}_{i}", store.source_text(s.id).split("\n")[i])
        for s in store.list_sources(bucket)
        for i in range(s.chunk_count)
    ]
    vectors = np.stack([vector_for(text) for _, text in chunks])
    scores = vectors @ vector_for(query)
    return [chunks[i][0] for i in np.argsort(-scores)[:10]]


def has_vector_index(url: str) -> bool:
    with psycopg.connect(url) as conn:
        found = conn.execute("SELECT 1 FROM pg_indexes WHERE indexname LIKE 'vectors_hnsw%'")
        return found.fetchone() is not None


def test_a_bulk_loaded_store_answers_every_read_as_one_written_source_by_source(
    new_database: Callable[[], str], tmp_path: Path
) -> None:
    # exact_below 0: every dense search walks the HNSW index whenever there is one.
    options = {"embedder": EMBEDDER, "dim": DIM, "exact_below": 0}
    one_by_one = PostgresStore(new_database(), tmp_path / "a", **options)  # type: ignore[arg-type]
    bulk_url = new_database()
    bulk = PostgresStore(bulk_url, tmp_path / "b", **options)  # type: ignore[arg-type]
    try:
        bucket = one_by_one.create_bucket("notes", tenant_id="default").id
        for source in drafts(bucket):
            one_by_one.add_source(source)
        expected = reads(one_by_one, bucket)

        loaded = bulk.create_bucket("notes", tenant_id="default").id
        loading = bulk.bulk_load()
        loading.__enter__()
        for source in drafts(loaded):
            bulk.add_source(source)
        # Without the index: every dense search compares every chunk.
        assert not has_vector_index(bulk_url)
        assert reads(bulk, loaded) == expected
        everyone = Scope(principal=LOCAL, bucket_ids=(loaded,))
        for query in QUERIES:
            hits = bulk.search_dense(vector_for(query), everyone, limit=10)
            assert [h.chunk_id for h in hits] == exact_dense(bulk, loaded, query)

        # While the index is being built (here: held up by another writer of vectors), searches
        # go on without it.
        with psycopg.connect(bulk_url) as writer:
            writer.execute("LOCK TABLE vectors IN ROW EXCLUSIVE MODE")
            building = threading.Thread(target=loading.__exit__, args=(None, None, None))
            building.start()
            while not _waits_for_a_lock(bulk_url):
                time.sleep(0.05)
            assert reads(bulk, loaded) == expected
            writer.rollback()
        building.join()
        assert has_vector_index(bulk_url)
        assert reads(bulk, loaded) == expected
        # And it goes on taking sources one by one, into the index.
        line = "Parcels are delivered within two days."
        added = bulk.add_source(draft(loaded, "extra.txt", line))
        hits = bulk.search_dense(vector_for(line), everyone, limit=1)
        assert [h.chunk_id for h in hits] == [f"chk_{added.id.removeprefix('src_')}_0"]
    finally:
        bulk.close()
        one_by_one.close()


def _waits_for_a_lock(url: str) -> bool:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query LIKE 'CREATE INDEX%'"
        ).fetchone()
        return row is not None and row[0] > 0
