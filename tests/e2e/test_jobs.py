"""Background ingests outlive the server process reading them: two real servers on one
PostgreSQL database, one killed while OCR reads a scan, the other finishing it; and one server
killed (or stopped with Ctrl-C) and started again on its own data folder, finishing it itself."""

from __future__ import annotations

import io
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pypdfium2
import pytest

from tests.e2e.test_server import free_port, launched, wait_healthy

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LEASE_SECONDS = "3"
DOCLING = "Docling bundles PDF document conversion to JSON and Markdown"
"""The sentence of the scanned page ``pdf_scanned/docling_ocr_test.pdf``."""
ENV = {
    # One page at a time, so that killing the server after the first page leaves seven unread.
    "CITEWELL_OCR__WORKERS": "1",
    "CITEWELL_INGEST__MAX_FILE_BYTES": "2000000",
    "CITEWELL_JOBS__LEASE_SECONDS": LEASE_SECONDS,
    "CITEWELL_JOBS__POLL_SECONDS": "0.5",
}


def eight_scanned_pages(documents: Path) -> bytes:
    merged = pypdfium2.PdfDocument.new()
    for _ in range(4):
        for name in ("docling_ocr_test.pdf", "ocrmypdf_linn.pdf"):
            merged.import_pages(pypdfium2.PdfDocument(documents / "pdf_scanned" / name))
    buffer = io.BytesIO()
    merged.save(buffer)
    return buffer.getvalue()


@contextmanager
def serving(data_dir: Path, log: Path, env: dict[str, str]) -> Iterator[tuple[str, Any]]:
    """A real ``citewell serve``: its URL and process."""
    port = free_port()
    with launched(data_dir, "--port", str(port), log=log, env={**ENV, **env}) as process:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, process, log)
        yield url, process


def until(condition: Callable[[], Any], what: str, *, tries: int = 1200) -> Any:
    """Poll ``condition`` until it is truthy (bounded: the test does not time it)."""
    for _ in range(tries):
        if found := condition():
            return found
        time.sleep(0.1)
    raise AssertionError(f"never: {what}")


def source(url: str, source_id: str) -> dict[str, Any]:
    body: dict[str, Any] = httpx.get(f"{url}/v1/sources/{source_id}", timeout=30).json()
    return body


def upload_and_stop_mid_ocr(
    url: str, process: subprocess.Popen[str], scan: bytes, stop: signal.Signals
) -> str:
    """Upload the scan, send ``stop`` to the server once OCR has read a page, wait for it to
    end; the source's id."""
    assert httpx.post(f"{url}/v1/buckets", json={"slug": "scans"}, timeout=60).status_code == 201
    assert (
        httpx.post(
            f"{url}/v1/buckets/scans/sources",
            files={"file": ("notes.txt", b"Kept whatever happens.", "text/plain")},
            timeout=60,
        ).status_code
        == 201
    )
    response = httpx.post(
        f"{url}/v1/buckets/scans/sources",
        files={"file": ("scans.pdf", scan, "application/pdf")},
        timeout=60,
    )
    assert response.status_code == 202, response.text
    source_id: str = response.json()["source"]["id"]
    until(lambda: source(url, source_id)["progress"]["pages_done"] >= 1, "a page read")
    os.kill(process.pid, stop)
    process.wait(timeout=60)
    return source_id


def assert_stored_once(url: str, source_id: str, scan: bytes) -> None:
    ready = until(
        lambda: (found := source(url, source_id))["status"] == "ready" and found,
        "the scan stored",
    )
    assert (ready["page_count"], ready["byte_size"]) == (8, len(scan))
    listed = httpx.get(f"{url}/v1/buckets/scans/sources", timeout=60).json()["data"]
    assert sorted((s["filename"], s["id"] == source_id) for s in listed) == [
        ("notes.txt", False),
        ("scans.pdf", True),
    ]
    hits = httpx.post(
        f"{url}/v1/search", json={"query": DOCLING, "buckets": ["scans"]}, timeout=60
    ).json()["data"]
    assert hits and hits[0]["source"]["id"] == source_id


@pytest.mark.integration
def test_a_scan_whose_server_is_killed_mid_ocr_is_finished_by_another_once(
    tmp_path: Path, documents: Path, database_url: str
) -> None:
    import psycopg

    scan = eight_scanned_pages(documents)
    env = {"CITEWELL_DATABASE_URL": database_url}
    shared = tmp_path / "data"  # the blobs both servers read
    with ExitStack() as servers:
        a_url, a_process = servers.enter_context(serving(shared, tmp_path / "a.log", env))
        b_url, _ = servers.enter_context(serving(shared, tmp_path / "b.log", env))
        source_id = upload_and_stop_mid_ocr(a_url, a_process, scan, signal.SIGKILL)
        # B sees the job A left, unfinished, until A's lease runs out and B takes it over.
        assert source(b_url, source_id)["status"] == "processing"
        assert_stored_once(b_url, source_id, scan)
    with psycopg.connect(database_url) as conn:
        jobs = conn.execute("SELECT id, state, attempts FROM ingest_jobs").fetchall()
        stored = conn.execute(
            "SELECT count(*) FROM sources WHERE filename = 'scans.pdf'"
        ).fetchone()
    assert (jobs, stored) == ([(source_id, "done", 2)], (1,))


@pytest.mark.parametrize(
    ("stop", "attempts"),
    [
        (signal.SIGKILL, 2),
        # A server stopping cleanly gives the job back: the run it cut short is not counted.
        (signal.SIGINT, 1),
    ],
)
def test_a_scan_whose_only_server_stops_mid_ocr_is_finished_after_a_restart(
    tmp_path: Path, documents: Path, stop: signal.Signals, attempts: int
) -> None:
    scan = eight_scanned_pages(documents)
    data = tmp_path / "data"
    with serving(data, tmp_path / "first.log", {}) as (url, process):
        source_id = upload_and_stop_mid_ocr(url, process, scan, stop)
    with serving(data, tmp_path / "again.log", {}) as (url, _):
        assert_stored_once(url, source_id, scan)
    with sqlite3.connect(data / "citewell.db") as db:
        jobs = db.execute("SELECT id, state, attempts FROM ingest_jobs").fetchall()
    db.close()
    assert jobs == [(source_id, "done", attempts)]
