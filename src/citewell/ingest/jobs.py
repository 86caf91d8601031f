"""Ingests that go on after the call that started them, kept in the store so that any server
process sharing it can finish them.

An ingest that needs OCR can take minutes (a 200-page scan), so ``Library.submit`` hands back an
``IngestJob`` as soon as OCR starts and goes on in the background; the source is ``processing``
until it is stored. The job is a row in the store (``Store.add_job``), written after the file's
bytes are saved in the blob folder, and the process that runs it holds a lease on it, renewed
while it works. A process that dies (killed, crashed, restarted) stops renewing: once its lease
runs out, any ``citewell serve`` process on the same store claims the job (``Store.claim_job``,
exclusive) and reads the file again from its saved bytes, up to ``JobSettings.max_attempts``
runs. Storing stays one atomic step at the end (``Store.add_source``) under the id promised for
the source, and a bucket holds each content once, so a job run twice stores one source: the
second run finds it stored and ends with it.

Finished jobs are kept (the newest ``KEPT_FINISHED``) so that a client polling the source learns
how it ended.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum

from citewell.model import MetadataValue

__all__ = ["KEPT_FINISHED", "IngestJob", "JobState"]

KEPT_FINISHED = 256


class JobState(StrEnum):
    QUEUED = "queued"
    """Waiting for a process: given back by one that stopped before the job ended."""
    RUNNING = "running"
    """Leased to a process, which reads the file (or died: then the lease runs out)."""
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class IngestJob:
    """One file being ingested in the background, as the source it will become: a snapshot of
    its row in the store."""

    source_id: str
    """The id the source gets when it is stored (the job's id)."""
    tenant_id: str
    bucket_id: str
    filename: str
    mime_type: str
    content_hash: str
    byte_size: int
    acl: frozenset[str]
    metadata: dict[str, MetadataValue]
    effective_date: dt.date | None
    created_at: dt.datetime
    state: JobState = JobState.RUNNING
    attempts: int = 1
    """Runs started, the one under way included."""
    pages_done: int = 0
    pages_total: int = 0
    """Pages to read with OCR (a PDF's pages with a text layer are not counted)."""
    result_id: str | None = None
    """Once ``done``, the source it ended with: its own, or the one the bucket held already
    (the bucket got the same bytes meanwhile)."""
    error: str | None = None
    """Why it failed, once ``failed``."""
    unreadable: bool = False
    """Whether it failed on the file itself (damaged, too large, unsupported) rather than on
    the server."""
    submitter_labels: frozenset[str] | None = None
    """The ACL labels its submitter sees (None: every label). The job runs within them: it
    finds the same bytes, and supersedes a version, only where its submitter could."""

    @property
    def active(self) -> bool:
        """Whether it has yet to end (queued or running)."""
        return self.state in (JobState.QUEUED, JobState.RUNNING)
