"""Background ingests taken over by a library: a job whose process died is run again, and a
run that finds the source stored already ends the job with it, storing nothing twice."""

from __future__ import annotations

import datetime as dt
import time

from citewell.config import JobSettings, Settings
from citewell.library import Library
from citewell.model import IngestJob, JobState
from citewell.store.base import new_source_id
from citewell.store.objects.blobs import content_hash

NOTE = b"Refunds take 30 days from the date of purchase."


def left_behind(library: Library, data: bytes, bucket: str) -> IngestJob:
    """A job of ``data`` whose process died: its lease ran out a second before it was kept."""
    job = IngestJob(
        source_id=new_source_id(),
        tenant_id="default",
        bucket_id=library.get_bucket(bucket).id,
        filename="note.txt",
        mime_type="text/plain",
        content_hash=content_hash(data),
        byte_size=len(data),
        acl=frozenset(),
        metadata={},
        effective_date=None,
        created_at=dt.datetime.now(dt.UTC),
    )
    library.store.add_job(job, data, owner="a dead server", lease_seconds=-1)
    return job


def ended(library: Library, source_id: str) -> IngestJob:
    """The job once it ended (polled, not timed)."""
    for _ in range(600):
        job = library.ingest_job(source_id)
        if not job.active:
            return job
        time.sleep(0.05)
    raise AssertionError(f"{source_id} never ended")


def quick(settings: Settings) -> Settings:
    return settings.model_copy(update={"jobs": JobSettings(lease_seconds=2, poll_seconds=0.05)})


def test_a_job_whose_process_died_is_run_again_and_stored(settings: Settings) -> None:
    with Library.open(quick(settings)) as library:
        library.create_bucket("notes")
        job = left_behind(library, NOTE, "notes")
        library.start_worker()
        done = ended(library, job.source_id)
        assert (done.state, done.result_id, done.attempts) == (JobState.DONE, job.source_id, 2)
        [stored] = library.list_sources("notes")
        assert (stored.id, stored.content_hash) == (job.source_id, job.content_hash)


def test_a_job_whose_process_died_after_storing_ends_with_that_source(
    settings: Settings,
) -> None:
    with Library.open(quick(settings)) as library:
        library.create_bucket("notes")
        job = left_behind(library, NOTE, "notes")
        # The dead process had stored the source, and died before it could end the job.
        library.ingest(NOTE, filename="note.txt", bucket="notes", source_id=job.source_id)
        library.start_worker()
        done = ended(library, job.source_id)
        assert (done.state, done.result_id) == (JobState.DONE, job.source_id)
        assert [s.id for s in library.list_sources("notes")] == [job.source_id]
