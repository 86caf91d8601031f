"""The behaviour every Store must show. A backend's test module subclasses ``StoreContract``
and provides a ``store`` fixture opened with ``embedder=EMBEDDER`` and ``dim=DIM``."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from citewell.errors import Conflict, NotFound
from citewell.model import ChunkDraft, Comparison, CompoundFilter, Principal, Span
from citewell.store.base import Fusion, Scope, SourceDraft, Store

EMBEDDER = "test-embedder"
DIM = 16
LOCAL = Principal.local()
HR = frozenset({"hr"})


def kill_when_blocked(script: str, *args: str) -> None:
    """Run ``script`` in a new Python process until it prints ``blocked`` (it then waits inside
    the write under test), and kill it there with SIGKILL."""
    repo = Path(__file__).resolve().parents[2]
    with subprocess.Popen(
        [sys.executable, "-c", script, *args],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "blocked\n", "the writer ended before blocking"
        finally:
            child.kill()


def vector_for(text: str) -> np.ndarray:
    """A deterministic unit vector per text: equal texts meet, different texts mostly don't."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return vector / np.linalg.norm(vector)


def draft(
    bucket_id: str,
    filename: str,
    text: str,
    *,
    acl: frozenset[str] = frozenset(),
    metadata: dict | None = None,
    effective_date: dt.date | None = None,
    language: str = "en",
) -> SourceDraft:
    """A source whose lines are its chunks and sentences."""
    spans = [Span(start=m.start(), end=m.end()) for m in re.finditer(r"[^\n]+", text)]
    chunks = tuple(
        ChunkDraft(
            span=span, heading_path=(), page_numbers=(), sentences=(span,), language=language
        )
        for span in spans
    )
    texts = [text[s.start : s.end] for s in spans]
    content = text.encode()
    return SourceDraft(
        bucket_id=bucket_id,
        filename=filename,
        mime_type="text/plain",
        content=content,
        content_hash=hashlib.sha256(content).hexdigest(),
        text=text,
        chunks=chunks,
        vectors=np.stack([vector_for(t) for t in texts]).astype(np.float32),
        vector_keys=tuple(hashlib.sha256(t.encode()).hexdigest() for t in texts),
        embedder=EMBEDDER,
        acl=acl,
        metadata=metadata or {},
        effective_date=effective_date,
    )


def texts_found(store: Store, query: str, scope: Scope) -> list[str]:
    chunks = store.get_chunks([h.chunk_id for h in store.search_lexical(query, scope, limit=10)])
    return [chunk.text for chunk in chunks.values()]


class StoreContract:
    @pytest.fixture
    def bucket(self, store: Store) -> str:
        return store.create_bucket("handbook", tenant_id="default").id

    def scope(self, bucket: str, **kwargs) -> Scope:
        return Scope(principal=kwargs.pop("principal", LOCAL), bucket_ids=(bucket,), **kwargs)

    # buckets
    def test_creating_a_bucket_twice_returns_the_same_bucket(self, store: Store) -> None:
        first = store.create_bucket("notes", tenant_id="default", name="Notes")
        again = store.create_bucket("notes", tenant_id="default", name="Other name")
        assert again == first
        assert first.name == "Notes"

    def test_buckets_of_one_tenant_are_invisible_to_another(self, store: Store) -> None:
        store.create_bucket("notes", tenant_id="acme")
        with pytest.raises(NotFound):
            store.get_bucket("notes", tenant_id="other")
        assert store.list_buckets(tenant_id="other") == []

    # sources and versions
    def test_a_stored_source_keeps_its_text_and_attributes(self, store: Store, bucket: str) -> None:
        source = store.add_source(
            draft(
                bucket,
                "policy.txt",
                "Refunds take 30 days.\nShipping is free.",
                acl=frozenset({"hr"}),
                metadata={"team": "support", "year": 2026},
                effective_date=dt.date(2026, 1, 1),
            )
        )
        assert source.version == 1 and source.is_current
        assert store.source_text(source.id) == "Refunds take 30 days.\nShipping is free."
        assert source.acl == frozenset({"hr"})
        assert source.metadata == {"team": "support", "year": 2026}
        assert source.effective_date == dt.date(2026, 1, 1)
        assert store.original(source.id) == b"Refunds take 30 days.\nShipping is free."

    def test_the_same_bytes_twice_in_a_bucket_are_refused(self, store: Store, bucket: str) -> None:
        store.add_source(draft(bucket, "a.txt", "Same text."))
        with pytest.raises(Conflict):
            store.add_source(draft(bucket, "b.txt", "Same text."))
        assert [s.filename for s in store.list_sources(bucket)] == ["a.txt"]

    def test_the_same_bytes_under_other_labels_are_a_second_source(
        self, store: Store, bucket: str
    ) -> None:
        hidden = store.add_source(draft(bucket, "salaries.md", "Pay rises in May.", acl=HR))
        own = store.add_source(draft(bucket, "notes.md", "Pay rises in May."))
        assert own.id != hidden.id and own.content_hash == hidden.content_hash
        assert [s.id for s in store.find_sources(bucket, own.content_hash)] == [hidden.id, own.id]
        with pytest.raises(Conflict):
            store.add_source(draft(bucket, "again.md", "Pay rises in May.", acl=HR))
        store.delete_source(own.id)
        assert store.original(hidden.id) == b"Pay rises in May."

    def test_a_new_version_supersedes_only_a_version_its_writer_sees(
        self, store: Store, bucket: str
    ) -> None:
        hidden = store.add_source(draft(bucket, "salaries.md", "Pay rises in May.", acl=HR))
        eng = Principal(acl_labels=frozenset({"eng"}))
        own = store.add_source(
            replace(draft(bucket, "salaries.md", "Pay rises in June."), writer=eng)
        )
        assert (own.version, own.supersedes) == (1, None)
        assert store.get_source(hidden.id).is_current
        # A writer who sees both versions replaces the newest.
        newest = store.add_source(draft(bucket, "salaries.md", "Pay rises in July.", acl=HR))
        assert (newest.version, newest.supersedes) == (2, own.id)
        assert store.get_source(hidden.id).is_current

    def test_the_same_bytes_in_two_buckets_share_one_original(
        self, store: Store, bucket: str
    ) -> None:
        other = store.create_bucket("other", tenant_id="default").id
        first = store.add_source(draft(bucket, "a.txt", "Shared text."))
        second = store.add_source(draft(other, "a.txt", "Shared text."))
        assert first.id != second.id and first.content_hash == second.content_hash
        store.delete_source(first.id)
        assert store.original(second.id) == b"Shared text."

    def test_a_new_version_supersedes_the_current_one(self, store: Store, bucket: str) -> None:
        old = store.add_source(draft(bucket, "policy.txt", "Refunds take 30 days."))
        new = store.add_source(draft(bucket, "policy.txt", "Refunds take 60 days."))
        assert (new.version, new.supersedes) == (2, old.id)
        assert store.get_source(old.id).superseded_by == new.id
        assert [s.id for s in store.list_sources(bucket)] == [new.id]
        assert [s.id for s in store.list_sources(bucket, include_superseded=True)] == [
            old.id,
            new.id,
        ]
        assert texts_found(store, "refunds", self.scope(bucket)) == ["Refunds take 60 days."]
        both = self.scope(bucket, include_superseded=True)
        assert sorted(texts_found(store, "refunds", both)) == [
            "Refunds take 30 days.",
            "Refunds take 60 days.",
        ]

    def test_deleting_the_newest_version_makes_the_previous_current(
        self, store: Store, bucket: str
    ) -> None:
        old = store.add_source(draft(bucket, "policy.txt", "Refunds take 30 days."))
        new = store.add_source(draft(bucket, "policy.txt", "Refunds take 60 days."))
        store.delete_source(new.id)
        assert store.get_source(old.id).superseded_by is None
        assert texts_found(store, "refunds", self.scope(bucket)) == ["Refunds take 30 days."]

    def test_a_deleted_source_is_gone_everywhere(self, store: Store, bucket: str) -> None:
        source = store.add_source(draft(bucket, "policy.txt", "Refunds take 30 days."))
        chunk_ids = [
            h.chunk_id for h in store.search_lexical("refunds", self.scope(bucket), limit=5)
        ]
        store.delete_source(source.id)
        with pytest.raises(NotFound):
            store.get_source(source.id)
        with pytest.raises(NotFound):
            store.source_text(source.id)
        with pytest.raises(NotFound):
            store.original(source.id)
        assert store.get_chunks(chunk_ids) == {}
        assert store.search_lexical("refunds", self.scope(bucket), limit=5) == []
        assert (
            store.search_dense(vector_for("Refunds take 30 days."), self.scope(bucket), limit=5)
            == []
        )
        assert (
            store.cached_vectors(EMBEDDER, [hashlib.sha256(b"Refunds take 30 days.").hexdigest()])
            == {}
        )

    def test_deleting_a_bucket_removes_its_sources(self, store: Store, bucket: str) -> None:
        source = store.add_source(draft(bucket, "policy.txt", "Refunds take 30 days."))
        store.delete_bucket(bucket)
        with pytest.raises(NotFound):
            store.get_source(source.id)
        with pytest.raises(NotFound):
            store.get_bucket("handbook", tenant_id="default")

    # vectors
    def test_vectors_are_kept_under_the_hash_of_their_text(self, store: Store, bucket: str) -> None:
        store.add_source(draft(bucket, "a.txt", "Alpha line.\nBeta line."))
        keys = [hashlib.sha256(t).hexdigest() for t in (b"Alpha line.", b"Beta line.", b"Other.")]
        cached = store.cached_vectors(EMBEDDER, keys)
        assert set(cached) == set(keys[:2])
        np.testing.assert_array_equal(cached[keys[1]], vector_for("Beta line."))
        assert cached[keys[1]].dtype == np.float32
        assert store.cached_vectors("another-embedder", keys) == {}

    def test_chunks_without_a_models_vectors_get_them(self, store: Store, bucket: str) -> None:
        store.add_source(draft(bucket, "a.txt", "Alpha line.\nBeta line.\nAlpha line."))
        assert store.chunks_without_vectors(EMBEDDER, limit=10) == []
        missing = store.chunks_without_vectors("another-embedder", limit=10)
        assert sorted(chunk.text for _, chunk in missing) == ["Alpha line.", "Beta line."]
        assert len(store.chunks_without_vectors("another-embedder", limit=1)) == 1
        keys = [key for key, _ in missing]
        store.put_vectors("another-embedder", keys, np.stack([vector_for(k) for k in keys]))
        assert store.chunks_without_vectors("another-embedder", limit=10) == []
        assert set(store.cached_vectors("another-embedder", keys)) == set(keys)

    # search: scope applied inside the query
    def test_dense_search_finds_the_nearest_chunk(self, store: Store, bucket: str) -> None:
        store.add_source(draft(bucket, "a.txt", "Alpha line.\nBeta line.\nGamma line."))
        hits = store.search_dense(vector_for("Beta line."), self.scope(bucket), limit=3)
        assert store.get_chunks([hits[0].chunk_id])[hits[0].chunk_id].text == "Beta line."
        assert hits[0].score == pytest.approx(1.0, abs=1e-5)

    def test_acl_labels_hide_sources_on_every_search_path(self, store: Store, bucket: str) -> None:
        store.add_source(draft(bucket, "hr.txt", "Salary bands are secret.", acl=frozenset({"hr"})))
        store.add_source(draft(bucket, "all.txt", "Salary is paid monthly."))
        outsider = self.scope(bucket, principal=Principal(acl_labels=frozenset({"sales"})))
        insider = self.scope(bucket, principal=Principal(acl_labels=frozenset({"hr"})))
        assert texts_found(store, "salary", outsider) == ["Salary is paid monthly."]
        assert sorted(texts_found(store, "salary", insider)) == [
            "Salary bands are secret.",
            "Salary is paid monthly.",
        ]
        secret = vector_for("Salary bands are secret.")
        dense = store.search_dense(secret, outsider, limit=10)
        hybrid = store.search_hybrid("salary", secret, outsider, limit=10, fusion=Fusion())
        for hits in (dense, [h for h in hybrid]):
            texts = [c.text for c in store.get_chunks([h.chunk_id for h in hits]).values()]
            assert texts == ["Salary is paid monthly."]

    def test_a_principal_restricted_to_other_buckets_finds_nothing(
        self, store: Store, bucket: str
    ) -> None:
        store.add_source(draft(bucket, "a.txt", "Refunds take 30 days."))
        restricted = Principal(sees_all_labels=True, bucket_ids=frozenset({"bkt_elsewhere"}))
        assert (
            store.search_lexical("refunds", self.scope(bucket, principal=restricted), limit=5) == []
        )

    def test_metadata_filters_apply_before_ranking(self, store: Store, bucket: str) -> None:
        for year in range(2020, 2026):
            store.add_source(
                draft(
                    bucket,
                    f"report-{year}.txt",
                    f"Revenue grew in {year}.",
                    metadata={"year": year},
                )
            )
        recent = self.scope(bucket, filters=Comparison(type="gte", key="year", value=2024))
        assert sorted(texts_found(store, "revenue", recent)) == [
            "Revenue grew in 2024.",
            "Revenue grew in 2025.",
        ]
        either = CompoundFilter(
            type="or",
            filters=[
                Comparison(type="eq", key="year", value=2020),
                Comparison(type="eq", key="filename", value="report-2021.txt"),
            ],
        )
        assert sorted(texts_found(store, "revenue", self.scope(bucket, filters=either))) == [
            "Revenue grew in 2020.",
            "Revenue grew in 2021.",
        ]
        excluded = self.scope(
            bucket, filters=Comparison(type="nin", key="year", value=[2020, 2021, 2022, 2023, 2024])
        )
        assert texts_found(store, "revenue", excluded) == ["Revenue grew in 2025."]

    def test_effective_date_filters_compare_dates(self, store: Store, bucket: str) -> None:
        store.add_source(
            draft(bucket, "old.txt", "Policy one.", effective_date=dt.date(2024, 5, 1))
        )
        store.add_source(
            draft(bucket, "new.txt", "Policy two.", effective_date=dt.date(2026, 2, 1))
        )
        since = self.scope(
            bucket, filters=Comparison(type="gt", key="effective_date", value="2025-01-01")
        )
        assert texts_found(store, "policy", since) == ["Policy two."]
