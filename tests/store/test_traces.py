"""Traces are kept for the retention setting, as ids and scores only."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from citewell.model import Span, Trace, Verdict
from citewell.store.base import StoredTrace
from citewell.store.sqlite import SQLiteStore
from tests.contracts.store import DIM, EMBEDDER

TRACE = Trace(
    retrieved_chunk_ids=("src_a:0", "src_a:1"),
    cited_chunk_ids=("src_a:0",),
    verdicts=(
        Verdict(
            claim_index=0,
            chunk_id="src_a:0",
            source_id="src_a",
            span=Span(start=0, end=36),
            support=0.91,
            kept=True,
        ),
        Verdict(
            claim_index=0,
            chunk_id="src_a:1",
            source_id="src_a",
            span=Span(start=37, end=80),
            support=0.12,
            kept=False,
        ),
    ),
    timings_ms={"total": 12.5},
    settings_fingerprint="abc",
)


def open_store(folder: Path, days: int = 30) -> SQLiteStore:
    return SQLiteStore(folder, embedder=EMBEDDER, dim=DIM, trace_retention_days=days)


def stored(answer_id: str, age: timedelta) -> StoredTrace:
    return StoredTrace(answer_id, "citewell-agent", datetime.now(UTC) - age, TRACE)


def test_a_trace_is_kept_with_its_verdicts(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    try:
        store.put_trace(stored("ans_1", timedelta(0)))
        [kept] = store.list_traces()
    finally:
        store.close()
    assert (kept.answer_id, kept.agent, kept.trace) == ("ans_1", "citewell-agent", TRACE)
    assert [v.kept for v in kept.trace.verdicts] == [True, False]


def test_a_trace_older_than_the_retention_is_gone_after_reopening(tmp_path: Path) -> None:
    store = open_store(tmp_path, days=30)
    store.put_trace(stored("ans_recent", timedelta(days=29)))
    store.close()
    db = sqlite3.connect(tmp_path / "citewell.db")
    with db:  # written behind the store's back, as if kept by an earlier, longer setting
        db.execute(
            "INSERT INTO traces VALUES (?, ?, ?, ?)",
            ("ans_old", "citewell-agent", "2000-01-01T00:00:00.000000Z", TRACE.model_dump_json()),
        )
    db.close()
    store = open_store(tmp_path, days=30)
    try:
        assert [t.answer_id for t in store.list_traces()] == ["ans_recent"]
    finally:
        store.close()


def test_writing_a_trace_purges_expired_ones(tmp_path: Path) -> None:
    store = open_store(tmp_path, days=1)
    try:
        store.put_trace(stored("ans_old", timedelta(days=2)))
        store.put_trace(stored("ans_new", timedelta(0)))
        assert [t.answer_id for t in store.list_traces()] == ["ans_new"]
    finally:
        store.close()


def test_a_retention_of_zero_keeps_no_trace(tmp_path: Path) -> None:
    store = open_store(tmp_path, days=30)
    store.put_trace(stored("ans_1", timedelta(0)))
    store.close()
    store = open_store(tmp_path, days=0)
    try:
        assert store.list_traces() == []
        store.put_trace(stored("ans_2", timedelta(0)))
        assert store.list_traces() == []
    finally:
        store.close()


def test_the_traces_table_has_no_text_column(tmp_path: Path) -> None:
    open_store(tmp_path).close()
    db = sqlite3.connect(tmp_path / "citewell.db")
    columns = [row[1] for row in db.execute("PRAGMA table_info(traces)")]
    db.close()
    assert columns == ["answer_id", "agent", "created_at", "trace"]


def test_a_stored_trace_holds_no_text(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.put_trace(stored("ans_1", timedelta(0)))
    store.close()
    db = sqlite3.connect(tmp_path / "citewell.db")
    [(raw,)] = db.execute("SELECT trace FROM traces").fetchall()
    db.close()
    assert "text" not in raw  # no cited_text, no question, no answer
    assert set(Trace.model_validate_json(raw).model_dump()) == {
        "retrieved_chunk_ids",
        "cited_chunk_ids",
        "verdicts",
        "timings_ms",
        "settings_fingerprint",
    }
