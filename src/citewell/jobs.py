"""Background ingests: the files whose pages OCR reads after ``Library.submit`` has returned.

A job is a row in the store (``Store.add_job``) leased to the process that runs it. The
``JobRunner`` runs this process's jobs on a pool of threads (which mostly wait for the OCR pool,
which bounds the work), renews their leases while they run, takes over the jobs whose process
died (their bytes are in the store), and ends each one: done with the source it stored, failed
with the reason, or given back to the store when the process stops.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from typing import Protocol

from citewell.config import Settings
from citewell.errors import CitewellError, IngestError
from citewell.ingest.ocr import Progress
from citewell.model import IngestJob, IngestResult, Principal
from citewell.store import Store

__all__ = ["Ingest", "JobRunner"]

logger = logging.getLogger(__name__)

_THREADS = 64  # threads that mostly wait for the OCR pool, which bounds the work


class Ingest(Protocol):
    """``Library.ingest``, as a job runs it: the job's file into its bucket, as its submitter."""

    def __call__(
        self, job: IngestJob, data: bytes, principal: Principal, progress: Progress
    ) -> IngestResult: ...


class JobRunner:
    """Runs, renews, takes over and ends the background ingests of one process."""

    def __init__(self, settings: Settings, store: Store, ingest: Ingest) -> None:
        self._settings = settings
        self._store = store
        self._ingest = ingest
        self._pool = ThreadPoolExecutor(_THREADS, thread_name_prefix="ingest")
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        """Who holds the leases of the jobs this runner runs."""
        self._runs = 0  # jobs under way here
        self._runs_lock = threading.Lock()
        self._stopping = threading.Event()
        self._worker: threading.Thread | None = None

    def start(
        self, job: IngestJob, data: bytes | None, started: Callable[[int], None] | None
    ) -> Future[IngestResult]:
        """Run a job: one sent now (``data``; ``started`` hears when OCR starts, which makes it
        a job) or one taken over (``data`` None: its bytes are in the store)."""
        with self._runs_lock:
            self._runs += 1
        future = self._pool.submit(self._run, job, data, started)
        future.add_done_callback(lambda _: self._ended())
        return future

    def start_worker(self) -> None:
        """Keep, until ``close``, the leases of this runner's jobs, and take over those whose
        process died. Once is enough."""
        with self._runs_lock:
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="ingest-jobs", daemon=True)
                self._worker.start()

    def stop(self) -> None:
        """Take over no more jobs, and stop renewing leases; then the caller closes the OCR
        pool, which cancels the pages not yet read."""
        self._stopping.set()
        if self._worker is not None:
            self._worker.join()

    def close(self) -> None:
        """After ``stop`` and the OCR pool's close: wait for the jobs' threads, then give the
        jobs that did not end back to the store, for the next process on it to run again."""
        self._pool.shutdown(wait=True)
        self._store.release_jobs(owner=self.worker_id)

    def _work(self) -> None:
        """Renew this runner's leases and take over jobs left behind, every poll, until
        ``close``. A failing store is logged and tried again at the next poll."""
        jobs = self._settings.jobs
        while not self._stopping.wait(jobs.poll_seconds):
            try:
                self._store.renew_jobs(owner=self.worker_id, lease_seconds=jobs.lease_seconds)
                while self._has_room() and (claimed := self._claim()) is not None:
                    self.start(claimed, None, None)
            except CitewellError as error:
                logger.warning("background ingests: %s", error.message)

    def _has_room(self) -> bool:
        """Whether to take over another job: no more at once than there are OCR workers,
        so that a process does not hoard the jobs a dead one left."""
        with self._runs_lock:
            return self._runs < self._settings.ocr.workers and not self._stopping.is_set()

    def _claim(self) -> IngestJob | None:
        jobs = self._settings.jobs
        return self._store.claim_job(
            owner=self.worker_id, lease_seconds=jobs.lease_seconds, max_attempts=jobs.max_attempts
        )

    def _ended(self) -> None:
        with self._runs_lock:
            self._runs -= 1

    def _run(
        self, job: IngestJob, data: bytes | None, started: Callable[[int], None] | None
    ) -> IngestResult:
        """Ingest a job's file and end the job. A file sent now that needs no OCR never
        becomes a job: then ``started`` stays set."""

        def progress(done: int, total: int) -> None:
            nonlocal started
            if started is not None:
                started(total)
                started = None
            elif not self._store.job_progress(
                job.source_id, owner=self.worker_id, done=done, total=total
            ):
                raise _Cancelled  # deleted (or taken over): the pages not begun are not read

        # Whoever submitted the job was let in then; it runs as its tenant, within the labels
        # its submitter sees.
        submitter = Principal(
            tenant_id=job.tenant_id,
            acl_labels=job.submitter_labels or frozenset(),
            sees_all_labels=job.submitter_labels is None,
        )
        try:
            content = self._store.job_content(job.source_id) if data is None else data
            result = self._ingest(job, content, submitter, progress)
        except Exception as error:
            # While stopping, OCR was cancelled: ``close`` gives the job back.
            if (
                started is None
                and not self._stopping.is_set()
                and not isinstance(error, _Cancelled)
            ):
                self._fail(job, error)
            raise
        if started is None:
            finished = self._store.finish_job(
                job.source_id, owner=self.worker_id, result_id=result.source.id
            )
            if not finished and result.source.id == job.source_id:
                # Deleted while its last page was read: what it stored goes too.
                self._store.delete_source(result.source.id)
        return result

    def _fail(self, job: IngestJob, error: Exception) -> None:
        if not isinstance(error, CitewellError):
            logger.warning("background ingest of %s failed", job.source_id, exc_info=error)
        message = error.message if isinstance(error, CitewellError) else "the ingest failed"
        self._store.finish_job(
            job.source_id,
            owner=self.worker_id,
            error=message,
            unreadable=isinstance(error, IngestError),
        )


class _Cancelled(CancelledError):
    """Raised into a background ingest whose job was deleted: it stops reading, as when the
    process stops (not the file's fault)."""
