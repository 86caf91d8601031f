"""Background ingest jobs in the store, on every backend: claims are exclusive, a lease that
runs out is taken over, attempts are bounded, and a job's bytes are kept while it needs them."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from citewell.errors import NotFound
from citewell.model import IngestJob, JobState
from citewell.store.base import Store, job_interrupted, new_source_id
from citewell.store.objects.blobs import content_hash
from tests.contracts.store import draft
from tests.store.conftest import Backend

LEASE = 600.0
EXPIRED = -1.0
"""A lease that ran out a second before it was written."""


def job(store: Store, data: bytes, *, owner: str = "a", lease: float = LEASE) -> IngestJob:
    """A new job of ``data`` in the bucket 'scans', leased to ``owner``."""
    bucket = store.create_bucket("scans", tenant_id="default").id
    made = IngestJob(
        source_id=new_source_id(),
        tenant_id="default",
        bucket_id=bucket,
        filename="scan.png",
        mime_type="image/png",
        content_hash=content_hash(data),
        byte_size=len(data),
        acl=frozenset({"hr"}),
        metadata={"file_id": "file-1"},
        effective_date=dt.date(2026, 1, 2),
        created_at=dt.datetime.now(dt.UTC),
        pages_total=3,
    )
    store.add_job(made, data, owner=owner, lease_seconds=lease)
    return made


def claim(store: Store, owner: str, *, lease: float = LEASE) -> IngestJob | None:
    return store.claim_job(owner=owner, lease_seconds=lease, max_attempts=3)


def test_a_job_is_kept_as_it_was_sent_and_found_while_under_way(store: Store) -> None:
    sent = job(store, b"scan")
    assert store.get_job(sent.source_id) == sent
    assert store.list_jobs(sent.bucket_id) == [sent]
    assert store.find_jobs(sent.bucket_id, sent.content_hash) == [sent]
    assert store.job_content(sent.source_id) == b"scan"
    store.job_progress(sent.source_id, owner="a", done=1, total=3)
    assert store.get_job(sent.source_id).pages_done == 1
    store.finish_job(sent.source_id, owner="a", result_id=sent.source_id)
    done = store.get_job(sent.source_id)
    assert (done.state, done.result_id, done.active) == (JobState.DONE, sent.source_id, False)
    assert store.find_jobs(sent.bucket_id, sent.content_hash) == []


def test_each_job_is_claimed_by_exactly_one_of_many_concurrent_claimers(
    backend: Backend,
) -> None:
    first = backend.open()
    sent = {job(first, f"scan {i}".encode()).source_id for i in range(12)}
    first.release_jobs(owner="a")  # all queued
    claimers = [backend.open() for _ in range(6)]
    start = threading.Barrier(len(claimers))
    claimed: dict[str, list[str]] = {}

    def claim_all(store: Store, owner: str) -> None:
        start.wait()
        mine = claimed.setdefault(owner, [])
        while (taken := claim(store, owner)) is not None:
            mine.append(taken.source_id)

    threads = [
        threading.Thread(target=claim_all, args=(store, f"owner-{i}"))
        for i, store in enumerate(claimers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [source_id for ids in claimed.values() for source_id in ids]
    assert sorted(every) == sorted(sent)  # each once: none twice, none left
    for owner, ids in claimed.items():
        for source_id in ids:
            held = first.get_job(source_id)
            assert (held.state, held.attempts) == (JobState.RUNNING, 1), owner


def test_a_job_whose_lease_runs_out_is_taken_over_and_its_old_owner_ignored(
    store: Store,
) -> None:
    held = job(store, b"scan", owner="a")
    assert claim(store, "b") is None  # a's lease holds
    store.renew_jobs(owner="a", lease_seconds=EXPIRED)  # as if a had died
    taken = claim(store, "b")
    assert taken is not None
    assert (taken.source_id, taken.state, taken.attempts) == (held.source_id, JobState.RUNNING, 2)
    assert claim(store, "c") is None
    # a comes back to life: what it writes no longer counts.
    store.job_progress(held.source_id, owner="a", done=3, total=3)
    store.finish_job(held.source_id, owner="a", error="a's late failure")
    assert store.get_job(held.source_id) == taken
    store.finish_job(held.source_id, owner="b", result_id=held.source_id)
    assert store.get_job(held.source_id).state is JobState.DONE


def test_a_job_interrupted_on_every_attempt_fails_and_its_bytes_go(store: Store) -> None:
    held = job(store, b"scan", lease=EXPIRED)
    for owner, attempt in (("b", 2), ("c", 3)):
        taken = claim(store, owner, lease=EXPIRED)
        assert taken is not None and taken.attempts == attempt
    assert claim(store, "d") is None
    failed = store.get_job(held.source_id)
    assert (failed.state, failed.error, failed.attempts) == (
        JobState.FAILED,
        job_interrupted(3),
        3,
    )
    with pytest.raises(NotFound):
        store.job_content(held.source_id)


def test_a_job_given_back_by_a_stopping_process_is_queued_uncounted(store: Store) -> None:
    held = job(store, b"scan", owner="a")
    store.release_jobs(owner="a")
    queued = store.get_job(held.source_id)
    assert (queued.state, queued.attempts, queued.active) == (JobState.QUEUED, 0, True)
    taken = claim(store, "b")
    assert taken is not None and (taken.source_id, taken.attempts) == (held.source_id, 1)


def test_a_job_that_ended_is_forgotten(store: Store) -> None:
    held = job(store, b"scan")
    store.finish_job(held.source_id, owner="a", error="page 1 could not be read")
    store.delete_job(held.source_id)
    with pytest.raises(NotFound):
        store.get_job(held.source_id)
    with pytest.raises(NotFound):
        store.delete_job(held.source_id)


def test_a_job_under_way_is_cancelled_and_its_runner_told_at_its_next_page(store: Store) -> None:
    held = job(store, b"scan")
    assert store.job_progress(held.source_id, owner="a", done=1, total=3)
    assert store.ocr_backlog(held.tenant_id) == 2
    store.delete_job(held.source_id)
    assert not store.job_progress(held.source_id, owner="a", done=2, total=3)
    assert not store.finish_job(held.source_id, owner="a", result_id=held.source_id)
    assert store.ocr_backlog(held.tenant_id) == 0
    with pytest.raises(NotFound):
        store.job_content(held.source_id)  # its bytes went with it


def test_a_jobs_bytes_outlive_a_deleted_source_of_the_same_bytes(store: Store) -> None:
    text = "Refunds take 30 days."
    other = store.create_bucket("notes", tenant_id="default").id
    source = store.add_source(draft(other, "a.txt", text))
    held = job(store, text.encode())
    store.delete_source(source.id)
    assert store.job_content(held.source_id) == text.encode()
    store.finish_job(held.source_id, owner="a", error="page 1 could not be read")
    with pytest.raises(NotFound):
        store.job_content(held.source_id)
