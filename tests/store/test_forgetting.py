"""Deleting a source deletes every stored answer holding its text; buckets can be renamed."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

import pytest

from citewell.errors import Conflict, NotFound
from citewell.model import (
    Answer,
    Chunk,
    Citation,
    CitedSource,
    GroundingState,
    Passage,
    ScoreBreakdown,
    Source,
    StoredAnswer,
)
from citewell.store.base import Retention, Store
from citewell.store.sqlite import SQLiteStore
from tests.contracts.store import DIM, EMBEDDER, draft
from tests.store.conftest import Backend


@pytest.fixture
def bucket(store: Store) -> str:
    return store.create_bucket("handbook", tenant_id="default").id


def add(store: Store, bucket: str, filename: str, text: str) -> tuple[Source, Chunk]:
    source = store.add_source(draft(bucket, filename, text))
    chunk_id = f"chk_{source.id.removeprefix('src_')}_0"
    return source, store.get_chunks([chunk_id])[chunk_id]


def answer(
    *, cited: tuple[Source, Chunk] | None = None, retrieved: tuple[Source, Chunk] | None = None
) -> Answer:
    """An answer citing one source, and/or having retrieved (but not cited) another."""
    citations, sources, passages = [], [], []
    if cited is not None:
        source, chunk = cited
        citations.append(
            Citation(
                claim_index=0,
                source_index=1,
                source_id=source.id,
                chunk_id=chunk.id,
                span=chunk.span,
                cited_text=chunk.text,
            )
        )
        sources.append(CitedSource(source_index=1, source=source))
    for source, chunk in [p for p in (cited, retrieved) if p is not None]:
        passages.append(
            Passage(chunk=chunk, source=source, scores=ScoreBreakdown(fused=1.0), sentences=())
        )
    return Answer(
        id="ans_1",
        agent="citewell-agent",
        question="How long do refunds take?",
        text=cited[1].text if cited else "The sources do not say.",
        citations=tuple(citations),
        sources=tuple(sources),
        passages=tuple(passages),
        grounding=GroundingState.AVAILABLE if cited else GroundingState.MISSING,
        created_at=dt.datetime.now(dt.UTC),
    )


def keep(store: Store, response_id: str, kept: Answer, previous: str | None = None) -> None:
    store.put_answer(
        StoredAnswer(
            id=response_id, tenant_id="default", answer=kept, rendered="{}", previous_id=previous
        )
    )


def kept_ids(store: Store, *response_ids: str) -> list[str]:
    found = []
    for response_id in response_ids:
        try:
            found.append(store.get_answer(response_id, tenant_id="default").id)
        except NotFound:
            pass
    return found


def test_deleting_a_source_deletes_the_answers_citing_or_retrieving_it(
    store: Store, bucket: str
) -> None:
    refunds = add(store, bucket, "refunds.txt", "Refunds take thirty days.")
    shipping = add(store, bucket, "shipping.txt", "Shipping is free above fifty euros.")
    keep(store, "resp_cites", answer(cited=refunds))
    keep(store, "resp_retrieved", answer(cited=shipping, retrieved=refunds))
    keep(store, "resp_other", answer(cited=shipping))
    store.delete_source(refunds[0].id)
    assert kept_ids(store, "resp_cites", "resp_retrieved", "resp_other") == ["resp_other"]


def test_an_answer_continuing_a_deleted_one_is_deleted_with_it(store: Store, bucket: str) -> None:
    refunds = add(store, bucket, "refunds.txt", "Refunds take thirty days.")
    shipping = add(store, bucket, "shipping.txt", "Shipping is free above fifty euros.")
    keep(store, "resp_1", answer(cited=refunds))
    keep(store, "resp_2", answer(cited=shipping), previous="resp_1")
    keep(store, "resp_3", answer(), previous="resp_2")
    assert store.get_answer("resp_3", tenant_id="default").previous_id == "resp_2"
    store.delete_source(refunds[0].id)
    assert kept_ids(store, "resp_1", "resp_2", "resp_3") == []


def test_an_answer_continuing_one_already_deleted_is_not_kept(store: Store, bucket: str) -> None:
    shipping = add(store, bucket, "shipping.txt", "Shipping is free above fifty euros.")
    keep(store, "resp_2", answer(cited=shipping), previous="resp_gone")
    assert kept_ids(store, "resp_2") == []


def test_deleting_a_bucket_deletes_the_answers_of_its_sources(store: Store, bucket: str) -> None:
    other = store.create_bucket("other", tenant_id="default").id
    keep(store, "resp_1", answer(cited=add(store, bucket, "a.txt", "Refunds take thirty days.")))
    keep(store, "resp_2", answer(cited=add(store, other, "b.txt", "Shipping is free.")))
    store.delete_bucket(bucket)
    assert kept_ids(store, "resp_1", "resp_2") == ["resp_2"]


def test_answers_stored_before_the_migration_are_deleted_with_their_sources(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path, embedder=EMBEDDER, dim=DIM)
    bucket = store.create_bucket("handbook", tenant_id="default").id
    refunds = add(store, bucket, "refunds.txt", "Refunds take thirty days.")
    keep(store, "resp_old", answer(cited=refunds))
    store.close()
    with sqlite3.connect(tmp_path / "citewell.db") as conn:  # back to the schema before 0004
        conn.execute("DROP TABLE answer_sources")
        conn.execute("ALTER TABLE answers DROP COLUMN previous_id")
        conn.execute("DELETE FROM migrations WHERE name = '0004_answer_sources'")
    reopened = SQLiteStore(tmp_path, embedder=EMBEDDER, dim=DIM)
    try:
        assert kept_ids(reopened, "resp_old") == ["resp_old"]
        reopened.delete_source(refunds[0].id)
        assert kept_ids(reopened, "resp_old") == []
    finally:
        reopened.close()


def test_an_original_is_removed_with_the_last_source_holding_it(store: Store, bucket: str) -> None:
    other = store.create_bucket("other", tenant_id="default").id
    first, _ = add(store, bucket, "a.txt", "Refunds take thirty days.")
    second, _ = add(store, other, "b.txt", "Refunds take thirty days.")
    store.delete_source(first.id)
    assert store.blobs.exists(first.content_hash)
    assert store.original(second.id) == b"Refunds take thirty days."
    store.delete_bucket(other)
    assert not store.blobs.exists(first.content_hash)


def test_renaming_a_bucket_changes_its_slug_and_name_and_keeps_its_id(
    store: Store, bucket: str
) -> None:
    renamed = store.rename_bucket(bucket, slug="manual", name="Staff manual")
    assert (renamed.id, renamed.slug, renamed.name) == (bucket, "manual", "Staff manual")
    assert store.rename_bucket(bucket, name="Manual").slug == "manual"
    assert store.rename_bucket(bucket, slug="guide").name == "Manual"
    with pytest.raises(NotFound):
        store.get_bucket("handbook", tenant_id="default")


def test_a_slug_taken_in_the_tenant_is_refused_and_changes_nothing(
    store: Store, bucket: str
) -> None:
    store.create_bucket("manual", tenant_id="default")
    store.create_bucket("guide", tenant_id="other")
    with pytest.raises(Conflict) as refused:
        store.rename_bucket(bucket, slug="manual", name="Renamed")
    assert refused.value.param == "slug"
    assert store.get_bucket(bucket, tenant_id="default").name == "handbook"
    assert store.rename_bucket(bucket, slug="guide").slug == "guide"
    assert store.rename_bucket(bucket, slug="guide").slug == "guide"


def test_renaming_an_unknown_bucket_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        store.rename_bucket("bkt_nope", name="x")


def test_stored_answers_are_kept_for_their_retention_only(backend: Backend) -> None:
    store = backend.open(retention=Retention(answers=30))
    bucket = store.create_bucket("handbook", tenant_id="default").id
    cited = add(store, bucket, "refunds.txt", "Refunds are paid within thirty days.")
    keep(store, "resp_old", answer(cited=cited))
    keep(store, "resp_new", answer(cited=cited))
    store.close()
    old = (dt.datetime.now(dt.UTC) - dt.timedelta(days=31)).isoformat()  # as if kept 31 days ago
    backend.sql("UPDATE answers SET created_at = ? WHERE id = 'resp_old'", (old,))
    store = backend.open(retention=Retention(answers=30))
    try:
        assert kept_ids(store, "resp_old", "resp_new") == ["resp_new"]
        quoting = backend.sql("SELECT DISTINCT response_id FROM answer_sources")
        assert quoting == [("resp_new",)]
    finally:
        store.close()
    store = backend.open(retention=Retention(answers=0))
    try:
        keep(store, "resp_none", answer(cited=cited))
        assert kept_ids(store, "resp_new", "resp_none") == []
    finally:
        store.close()
