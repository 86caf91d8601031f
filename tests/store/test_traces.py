"""Traces are kept for the retention setting, as ids and scores only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from citewell.model import PartConflict, QuestionPart, ReadSentence, Span, Trace, Verdict
from citewell.store.base import Retention, StoredTrace
from tests.store.conftest import Backend

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
    question_parts=(
        QuestionPart(
            answerable=0.83,
            answered=True,
            conflict=PartConflict(
                preferred_chunk_id="src_a:0",
                preferred_span=Span(start=0, end=36),
                other_chunk_id="src_b:0",
                other_span=Span(start=0, end=35),
                decided=True,
            ),
        ),
    ),
    read_sentences=(
        ReadSentence(part=0, chunk_id="src_a:0", span=Span(start=0, end=36), answers=0.71),
    ),
    timings_ms={"total": 12.5},
    settings_fingerprint="abc",
)


def stored(answer_id: str, age: timedelta) -> StoredTrace:
    return StoredTrace(answer_id, "citewell-agent", datetime.now(UTC) - age, TRACE)


def test_a_trace_is_kept_with_its_verdicts(backend: Backend) -> None:
    store = backend.open()
    try:
        store.put_trace(stored("ans_1", timedelta(0)))
        [kept] = store.list_traces()
    finally:
        store.close()
    assert (kept.answer_id, kept.agent, kept.trace) == ("ans_1", "citewell-agent", TRACE)
    assert [v.kept for v in kept.trace.verdicts] == [True, False]


def test_a_trace_older_than_the_retention_is_gone_after_reopening(backend: Backend) -> None:
    store = backend.open(retention=Retention(traces=30))
    store.put_trace(stored("ans_recent", timedelta(days=29)))
    store.close()
    # written behind the store's back, as if kept by an earlier, longer setting
    backend.sql(
        "INSERT INTO traces VALUES (?, ?, ?, ?)",
        ("ans_old", "citewell-agent", "2000-01-01T00:00:00.000000Z", TRACE.model_dump_json()),
    )
    store = backend.open(retention=Retention(traces=30))
    try:
        assert [t.answer_id for t in store.list_traces()] == ["ans_recent"]
    finally:
        store.close()


def test_writing_a_trace_purges_expired_ones(backend: Backend) -> None:
    store = backend.open(retention=Retention(traces=1))
    try:
        store.put_trace(stored("ans_old", timedelta(days=2)))
        store.put_trace(stored("ans_new", timedelta(0)))
        assert [t.answer_id for t in store.list_traces()] == ["ans_new"]
    finally:
        store.close()


def test_a_retention_of_zero_keeps_no_trace(backend: Backend) -> None:
    store = backend.open(retention=Retention(traces=30))
    store.put_trace(stored("ans_1", timedelta(0)))
    store.close()
    store = backend.open(retention=Retention(traces=0))
    try:
        assert store.list_traces() == []
        store.put_trace(stored("ans_2", timedelta(0)))
        assert store.list_traces() == []
    finally:
        store.close()


@pytest.mark.parametrize("retention_days", [30, 0])
def test_a_trace_without_a_timezone_is_refused(backend: Backend, retention_days: int) -> None:
    store = backend.open(retention=Retention(traces=retention_days))
    try:
        naive = StoredTrace("ans_1", "citewell-agent", datetime(2026, 1, 1, 12), TRACE)
        with pytest.raises(ValueError, match="a trace's time must be timezone-aware"):
            store.put_trace(naive)
        assert store.list_traces() == []
    finally:
        store.close()


def test_a_trace_written_again_replaces_the_first(backend: Backend) -> None:
    store = backend.open()
    try:
        store.put_trace(stored("ans_1", timedelta(hours=1)))
        again = StoredTrace("ans_1", "other-agent", datetime.now(UTC), TRACE)
        store.put_trace(again)
        assert store.list_traces() == [again]
    finally:
        store.close()


def test_the_traces_table_has_no_text_column(backend: Backend) -> None:
    backend.open().close()
    columns = [
        row[0]
        for row in (
            backend.sql("SELECT name FROM pragma_table_info('traces')")
            if backend.name == "sqlite"
            else backend.sql(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_name = 'traces' ORDER BY ordinal_position"
            )
        )
    ]
    assert columns == ["answer_id", "agent", "created_at", "trace"]


def test_a_stored_trace_holds_no_text(backend: Backend) -> None:
    store = backend.open()
    store.put_trace(stored("ans_1", timedelta(0)))
    store.close()
    [(raw,)] = backend.sql("SELECT trace FROM traces")
    assert "text" not in raw  # no cited_text, no question, no answer
    assert set(Trace.model_validate_json(raw).model_dump()) == {
        "retrieved_chunk_ids",
        "cited_chunk_ids",
        "verdicts",
        "question_parts",
        "read_sentences",
        "timings_ms",
        "settings_fingerprint",
    }


def test_a_negative_retention_is_refused() -> None:
    with pytest.raises(ValueError, match="retention days must be >= 0"):
        Retention(traces=-1)
    with pytest.raises(ValueError, match="retention days must be >= 0"):
        Retention(answers=-1)
