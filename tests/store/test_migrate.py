"""Copying an embedded store into PostgreSQL keeps every id, version, time, vector and answer."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from citewell.cli import main
from citewell.config import BlobSettings
from citewell.errors import Conflict, NotFound
from citewell.model import (
    Agent,
    ApiKey,
    IngestJob,
    Modality,
    Page,
    Permission,
    Principal,
    Span,
    StoredAnswer,
    Trace,
)
from citewell.store.base import Fusion, Scope, Store, StoredTrace
from citewell.store.objects import FolderObjects
from citewell.store.objects.blobs import BlobStore, content_hash
from citewell.store.objects.s3 import S3Objects
from citewell.store.postgres import PostgresStore
from citewell.store.postgres.migrate import copy_embedded
from citewell.store.sqlite import SQLiteStore
from citewell.uploads import FileStore
from tests.contracts.store import DIM, EMBEDDER, draft, vector_for
from tests.store.test_forgetting import add, answer

pytestmark = pytest.mark.integration


def embedded_library(folder: Path) -> None:
    """A store with a bit of everything, closed."""
    store = SQLiteStore(folder, embedder=EMBEDDER, dim=DIM)
    tenant = store.create_tenant("Acme")
    store.put_key(
        ApiKey(
            id="key_1",
            tenant_id=tenant.id,
            permissions=frozenset({Permission.SEARCH}),
            acl_labels=frozenset({"hr"}),
            created_at=dt.datetime.now(dt.UTC),
        ),
        "secret-hash",
    )
    store.revoke_key("key_1", tenant_id=tenant.id)
    store.put_agent(Agent(name="helper", description="Helps."), tenant_id=tenant.id)
    bucket = store.create_bucket("handbook", tenant_id="default", name="Handbook").id
    other = store.create_bucket("notes", tenant_id=tenant.id).id
    store.add_source(draft(bucket, "policy.txt", "Refunds take 30 days.\nShipping is free."))
    paged = draft(
        bucket,
        "policy.txt",
        "Refunds take 60 days.\nShipping is free.",
        acl=frozenset({"hr"}),
        metadata={"year": 2026, "team": "support"},
        effective_date=dt.date(2026, 1, 1),
    )
    text = paged.text
    store.add_source(
        dataclasses.replace(
            paged,
            pages=(
                Page(
                    number=1,
                    label="i",
                    span=Span(start=0, end=len(text)),
                    width=600,
                    height=800,
                    modality=Modality.IMAGE,
                    ocr_confidence=91.5,
                ),
            ),
            char_boxes=(np.arange(len(text) * 4, dtype=np.float32).reshape(-1, 4),),
            char_confidences=(np.full(len(text), 90, dtype=np.uint8),),
        )
    )
    cited = add(store, other, "chinese.txt", "退款期限为三十天。")
    store.put_vectors("another-embedder", ["k1"], np.ones((1, 3), dtype=np.float32))
    store.put_answer(
        StoredAnswer(id="resp_1", tenant_id=tenant.id, answer=answer(cited=cited), rendered="{}")
    )
    store.put_trace(
        StoredTrace(
            "ans_1", "citewell-agent", dt.datetime.now(dt.UTC), Trace(settings_fingerprint="x")
        )
    )
    scan = b"%PDF- a scan being read"
    under_way = IngestJob(
        source_id="src_scan",
        tenant_id="default",
        bucket_id=bucket,
        filename="scan.pdf",
        mime_type="application/pdf",
        content_hash=content_hash(scan),
        byte_size=len(scan),
        acl=frozenset({"hr"}),
        metadata={"year": 2026},
        effective_date=dt.date(2026, 1, 1),
        created_at=dt.datetime.now(dt.UTC),
        pages_total=2,
    )
    store.add_job(under_way, scan, owner="a server", lease_seconds=60)
    ended = dataclasses.replace(under_way, source_id="src_ended", content_hash=content_hash(b"x"))
    store.add_job(ended, b"x", owner="a server", lease_seconds=60)
    store.finish_job("src_ended", owner="a server", error="page 1 could not be read")
    store.close()


def everything(store: Store) -> list[object]:
    """What a store answers about the library above."""
    tenants = store.list_tenants()
    found: list[object] = [tenants]
    for tenant in tenants:
        found += [store.list_keys(tenant.id), store.list_agents(tenant_id=tenant.id)]
        for bucket in store.list_buckets(tenant_id=tenant.id):
            sources = store.list_sources(bucket.id, include_superseded=True)
            found += [bucket, sources]
            for source in sources:
                chunk_ids = [f"chk_{source.id.removeprefix('src_')}_{i}" for i in range(3)]
                found += [
                    store.source_text(source.id),
                    store.source_pages(source.id),
                    store.original(source.id),
                    store.get_chunks(chunk_ids),
                ]
                for page in store.source_pages(source.id):
                    found += [
                        store.char_boxes(source.id, page.number).tolist(),
                        store.char_confidences(source.id, page.number).tolist(),
                    ]
            principal = Principal(tenant_id=tenant.id, sees_all_labels=True)
            scope = Scope(principal=principal, bucket_ids=(bucket.id,), include_superseded=True)
            vector = vector_for("Shipping is free.")
            for query in ("refunds shipping", "退款"):  # the same hits (ties fall either way)
                found += [
                    sorted(h.chunk_id for h in store.search_lexical(query, scope, limit=10)),
                    sorted(
                        h.chunk_id
                        for h in store.search_hybrid(
                            query, vector, scope, limit=10, fusion=Fusion()
                        )
                    ),
                ]
    found += [
        [
            [job for job in store.list_jobs(b.id) if job.active]
            for b in store.list_buckets(tenant_id="default")
        ],
        store.get_key("key_1"),
        store.get_answer("resp_1", tenant_id=tenants[1].id),
        [(t.answer_id, t.agent, t.trace) for t in store.list_traces()],
        {k: v.tolist() for k, v in store.cached_vectors("another-embedder", ["k1"]).items()},
    ]
    return found


def test_a_copy_answers_every_question_as_the_embedded_store_does(
    tmp_path: Path, database_url: str
) -> None:
    embedded_library(tmp_path)
    target = PostgresStore(database_url, tmp_path, embedder=EMBEDDER, dim=DIM)
    try:
        counts = copy_embedded(tmp_path, target, FolderObjects(tmp_path / "files"))
        assert (counts["sources"], counts["pages"], counts["chunks"]) == (3, 1, 5)
        assert counts["ingest_jobs"] == 1  # the one under way, not the one that failed
        assert counts["files"] == 0  # the uploads are where the servers on PostgreSQL look
        embedded = SQLiteStore(tmp_path, embedder=EMBEDDER, dim=DIM)
        try:
            embedded.release_jobs(owner="a server")  # as the copy queues it
            expected = everything(embedded)
        finally:
            embedded.close()
        assert everything(target) == expected
        with pytest.raises(Conflict):  # a second copy into the same database
            copy_embedded(tmp_path, target, FolderObjects(tmp_path / "files"))
    finally:
        target.close()


def test_a_copy_into_a_store_whose_originals_are_in_a_bucket_puts_them_there(
    tmp_path: Path, database_url: str, s3_blobs: BlobSettings
) -> None:
    embedded_library(tmp_path)
    uploaded = FileStore(FolderObjects(tmp_path / "files"))
    upload = uploaded.put(
        b"%PDF- uploaded", filename="a.pdf", mime_type="application/pdf", tenant_id="default"
    )
    uploaded.put_vector_store_metadata("bkt_1", {"team": "hr"}, tenant_id="default")
    blobs = BlobStore(S3Objects(s3_blobs, "blobs"))
    target = PostgresStore(
        database_url, tmp_path / "unused", embedder=EMBEDDER, dim=DIM, blobs=blobs
    )
    try:
        counts = copy_embedded(tmp_path, target, S3Objects(s3_blobs, "files"))
        assert counts["files"] == 3  # the upload's bytes and metadata, the vector store's
        served = FileStore(S3Objects(s3_blobs, "files"))
        assert served.get(upload.id, tenant_id="default") == upload
        assert served.content(upload.id, tenant_id="default") == b"%PDF- uploaded"
        assert served.vector_store_metadata("bkt_1", tenant_id="default") == {"team": "hr"}
        embedded = SQLiteStore(tmp_path, embedder=EMBEDDER, dim=DIM)
        try:
            embedded.release_jobs(owner="a server")
            expected = everything(embedded)  # every source's original among them
        finally:
            embedded.close()
        assert everything(target) == expected
        assert target.job_content("src_scan") == b"%PDF- a scan being read"
        assert not blobs.exists(content_hash(b"x"))  # the ended job's is not copied
    finally:
        target.close()


def test_a_folder_without_a_store_is_not_found(tmp_path: Path, database_url: str) -> None:
    target = PostgresStore(database_url, tmp_path / "pg", embedder=EMBEDDER, dim=DIM)
    try:
        with pytest.raises(NotFound):
            copy_embedded(tmp_path / "nothing", target, FolderObjects(tmp_path / "files"))
    finally:
        target.close()


def test_the_command_copies_once_and_then_refuses(tmp_path: Path, database_url: str) -> None:
    embedded_library(tmp_path)
    command = ["migrate", "--to", database_url, "--data-dir", str(tmp_path)]
    first = CliRunner().invoke(main, command)
    assert first.exit_code == 0, first.output
    assert first.output.startswith("copied 2 tenants, 1 api_keys, 1 agents, 2 buckets, 3 sources")
    again = CliRunner().invoke(main, command)
    assert again.exit_code == 1
    assert "already holds a library" in again.output
