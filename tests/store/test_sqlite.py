"""The embedded store: what only its pending state can show (the contract is in test_store.py)."""

from __future__ import annotations

import sqlite3
import textwrap
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from citewell.model import Page, Span
from citewell.store.base import Scope
from citewell.store.sqlite import SQLiteStore
from tests.contracts.store import DIM, EMBEDDER, LOCAL, draft, kill_when_blocked

# The child stores two sources, then blocks inside the third at the given stage and says so on
# its stdout; the test kills it there with SIGKILL.
_INGEST_AND_BLOCK = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from citewell.store.sqlite import SQLiteStore
    from tests.contracts.store import DIM, EMBEDDER, draft

    folder, stage = Path(sys.argv[1]), sys.argv[2]
    store = SQLiteStore(folder, embedder=EMBEDDER, dim=DIM)
    bucket = store.create_bucket("notes", tenant_id="default").id
    lines = "\\n".join(f"Line {i} about refunds and shipping." for i in range(300))
    for n in range(2):
        store.add_source(draft(bucket, f"doc-{n}.txt", f"Document {n}.\\n{lines}"))

    def block(*args, **kwargs):
        print("blocked", flush=True)
        time.sleep(600)

    if stage == "before_lexical_commit":
        writer = store.lexical.writer
        class Blocking:
            def __init__(self):
                self.inner = writer()
            def __enter__(self):
                w = self.inner.__enter__()
                original_add = w.add
                def add(docs):
                    original_add(docs)
                    block()
                w.add = add
                return w
            def __exit__(self, *exc):
                return self.inner.__exit__(*exc)
        store.lexical.writer = Blocking
    else:
        store._publish = block
    store.add_source(draft(bucket, "doc-2.txt", f"Document 2.\\n{lines}"))
    """
)


def _pending_rows(db: Path) -> int:
    with sqlite3.connect(db, timeout=5) as conn:
        return conn.execute("SELECT count(*) FROM sources WHERE status = 'pending'").fetchone()[0]


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["before_lexical_commit", "before_publish"])
def test_a_process_killed_mid_ingest_leaves_no_half_visible_source(
    tmp_path: Path, stage: str
) -> None:
    """kill -9 while a source is written but not published; the next open is clean."""
    kill_when_blocked(_INGEST_AND_BLOCK, str(tmp_path), stage)
    db = tmp_path / "citewell.db"
    assert _pending_rows(db) == 1  # the crash really was mid-ingest

    store = SQLiteStore(tmp_path, embedder=EMBEDDER, dim=DIM)
    assert _pending_rows(db) == 0
    bucket = store.get_bucket("notes", tenant_id="default").id
    sources = store.list_sources(bucket)
    assert sorted(s.filename for s in sources) == ["doc-0.txt", "doc-1.txt"]
    for source in sources:  # each survivor is complete
        assert store.source_text(source.id).count("\n") == 300
    scope = Scope(principal=LOCAL, bucket_ids=(bucket,))
    assert len(store.search_lexical("refunds", scope, limit=10_000)) == 2 * 300
    # Neither index nor blob folder keeps anything of the abandoned source.
    unscoped = store.lexical.search("document", source_keys=None, limit=10_000)
    chunks = store.get_chunks([h.chunk_id for h in unscoped])
    assert len(chunks) == len(unscoped) == 2
    assert {p.name for p in (tmp_path / "blobs").glob("*/*")} == {s.content_hash for s in sources}
    # And the store takes new sources again.
    store.add_source(draft(bucket, "doc-2.txt", "Document 2 again."))
    store.close()


def test_a_store_with_the_old_offset_columns_reads_the_same_once_upgraded(tmp_path: Path) -> None:
    """0011 renames pages' and chunks' ``start``/``end`` to PostgreSQL's names."""
    store = SQLiteStore(tmp_path, embedder=EMBEDDER, dim=DIM)
    bucket = store.create_bucket("notes", tenant_id="default").id
    text = "Refunds take 30 days.\nShipping is free."
    page = Page(number=1, label="i", span=Span(start=22, end=len(text)), width=600, height=800)
    boxes = np.ones((len(text) - 22, 4), dtype=np.float32)
    paged = replace(
        draft(bucket, "a.pdf", text),
        pages=(page,),
        char_boxes=(boxes,),
        char_confidences=(np.empty(0, dtype=np.uint8),),
    )
    source = store.add_source(paged)
    scope = Scope(principal=LOCAL, bucket_ids=(bucket,))
    hit_ids = [h.chunk_id for h in store.search_lexical("shipping", scope, limit=5)]
    chunks, pages = store.get_chunks(hit_ids), store.source_pages(source.id)
    store.close()
    conn = sqlite3.connect(tmp_path / "citewell.db")
    with conn:  # as the store was before 0011
        for table in ("pages", "chunks"):
            conn.execute(f"ALTER TABLE {table} RENAME COLUMN start_offset TO start")
            conn.execute(f"ALTER TABLE {table} RENAME COLUMN end_offset TO end")
        conn.execute("DELETE FROM migrations WHERE name = '0011_offset_columns'")
    conn.close()
    store = SQLiteStore(tmp_path, embedder=EMBEDDER, dim=DIM)
    try:
        assert store.get_chunks(hit_ids) == chunks
        assert [c.text for c in chunks.values()] == ["Shipping is free."]
        assert store.source_pages(source.id) == pages == (page,)
        np.testing.assert_array_equal(store.char_boxes(source.id, 1), boxes)
    finally:
        store.close()


def test_a_store_of_the_last_schema_is_upgraded_with_its_sources_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0010 rebuilds the sources table: pages, chunks and search must survive it. (The store
    before it has 0011's column names, which the code that writes its source reads.)"""
    from citewell.store.sqlite import schema

    before = tuple(m for m in schema.MIGRATIONS if not m[0].startswith("0010"))
    with monkeypatch.context() as patched:
        patched.setattr(schema, "MIGRATIONS", before)
        old = SQLiteStore(tmp_path, embedder=EMBEDDER, dim=DIM)
        bucket = old.create_bucket("notes", tenant_id="default").id
        source = old.add_source(draft(bucket, "a.txt", "Refunds take 30 days.\nShipping is free."))
        old.close()
    store = SQLiteStore(tmp_path, embedder=EMBEDDER, dim=DIM)
    try:
        assert store.get_source(source.id) == source
        scope = Scope(principal=LOCAL, bucket_ids=(bucket,))
        hits = store.search_lexical("shipping", scope, limit=5)
        chunks = store.get_chunks([h.chunk_id for h in hits])
        assert [c.text for c in chunks.values()] == ["Shipping is free."]
        store.delete_source(source.id)  # foreign keys are on again: its chunks go with it
        conn = sqlite3.connect(tmp_path / "citewell.db")
        assert conn.execute("SELECT count(*) FROM chunks").fetchone() == (0,)
    finally:
        store.close()


def test_a_store_opened_while_another_process_creates_its_database_waits_for_it(
    tmp_path: Path,
) -> None:
    # Another writer holds a write lock on the database before it is in WAL mode, as a process
    # creating the same store does; SQLite refuses the switch to WAL at once, without waiting.
    locked, release = threading.Event(), threading.Event()

    def create_slowly() -> None:
        other = sqlite3.connect(tmp_path / "citewell.db", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        other.execute("CREATE TABLE other_process (x)")
        locked.set()
        release.wait()
        other.execute("COMMIT")
        other.close()

    creator = threading.Thread(target=create_slowly)
    creator.start()
    locked.wait()
    threading.Timer(0.5, release.set).start()
    started = time.monotonic()
    store = SQLiteStore(tmp_path, embedder=EMBEDDER, dim=DIM)
    creator.join()
    try:
        assert time.monotonic() - started >= 0.5
        assert store.create_bucket("notes", tenant_id="default").name == "notes"
        with sqlite3.connect(tmp_path / "citewell.db") as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        store.close()
