"""Ingests that go on after the call that started them: each one's progress and outcome.

An ingest that needs OCR can take minutes (a 200-page scan), so ``Library.submit`` runs it in a
background thread once OCR turns out to be needed and hands back an ``IngestJob`` at once; the
source is ``processing`` until it is stored. Storing stays one atomic step at the end
(``Store.add_source``): until then nothing of the source is searchable.

The table lives in memory, in the process that runs the ingest. A restart forgets its jobs: the
source's half-written rows are removed at the next open, as after any crash, and the file has to
be sent again. Finished jobs are kept (the newest ``KEPT_FINISHED``) so that a client polling
the source learns how it ended.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from enum import StrEnum

from citewell.model import IngestResult, MetadataValue

__all__ = ["IngestJob", "IngestJobs", "JobState", "KEPT_FINISHED"]

KEPT_FINISHED = 256


class JobState(StrEnum):
    PROCESSING = "processing"
    DONE = "done"
    FAILED = "failed"


@dataclass
class IngestJob:
    """One file being ingested in the background, as the source it will become."""

    source_id: str
    """The id the source gets when it is stored."""
    bucket_id: str
    filename: str
    mime_type: str
    content_hash: str
    byte_size: int
    acl: frozenset[str]
    metadata: dict[str, MetadataValue]
    effective_date: dt.date | None
    created_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    state: JobState = JobState.PROCESSING
    pages_done: int = 0
    pages_total: int = 0
    """Pages to read with OCR (a PDF's pages with a text layer are not counted)."""
    result: IngestResult | None = None
    """How it ended, once ``done``: the stored source (the one held already, if the bucket got
    the same bytes meanwhile)."""
    error: str | None = None
    """Why it failed, once ``failed``."""
    unreadable: bool = False
    """Whether it failed on the file itself (damaged, too large, unsupported) rather than on
    the server."""

    def progress(self, done: int, total: int) -> None:
        self.pages_done, self.pages_total = done, total


class IngestJobs:
    """The background ingests of one process, by source id (thread-safe)."""

    def __init__(self) -> None:
        self._jobs: OrderedDict[str, IngestJob] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, job: IngestJob) -> None:
        with self._lock:
            self._jobs[job.source_id] = job

    def get(self, source_id: str) -> IngestJob | None:
        with self._lock:
            return self._jobs.get(source_id)

    def in_bucket(self, bucket_id: str) -> list[IngestJob]:
        """The jobs of a bucket, running and finished, oldest first."""
        with self._lock:
            jobs = [job for job in self._jobs.values() if job.bucket_id == bucket_id]
        return sorted(jobs, key=lambda job: job.created_at)

    def forget(self, job: IngestJob) -> None:
        """Forget a finished job, as if it had never run."""
        with self._lock:
            if job.state is JobState.PROCESSING:
                # finish() expects to find it still here.
                raise ValueError(f"job {job.source_id} is still processing")
            self._jobs.pop(job.source_id, None)

    def processing(self, bucket_id: str, content_hash: str) -> IngestJob | None:
        """The job processing these bytes for this bucket, if there is one."""
        with self._lock:
            return next(
                (
                    job
                    for job in self._jobs.values()
                    if job.state is JobState.PROCESSING
                    and (job.bucket_id, job.content_hash) == (bucket_id, content_hash)
                ),
                None,
            )

    def finish(
        self,
        job: IngestJob,
        result: IngestResult | None,
        error: str | None,
        *,
        unreadable: bool = False,
    ) -> None:
        """Record how ``job`` ended, and forget the oldest finished jobs past the limit."""
        with self._lock:
            job.result, job.error, job.unreadable = result, error, unreadable
            job.state = JobState.DONE if error is None else JobState.FAILED
            self._jobs.move_to_end(job.source_id)
            finished = [k for k, j in self._jobs.items() if j.state is not JobState.PROCESSING]
            for key in finished[: max(0, len(finished) - KEPT_FINISHED)]:
                del self._jobs[key]
