"""What a cheap hostile request can cost the server, measured on a real one (``citewell serve
--port 0`` on an empty data folder, the fast embedder, as the tests run it).

1. **Blank pages.** A PDF of 2,000 blank pages (about 250 KB) is uploaded: the status, the wall
   time of the upload and the CPU seconds the server spent on it (user + system, from
   /proc/PID/stat). Then a scan being read with OCR is deleted mid-way: the time to the 200, and
   whether anything of it is left once the server has settled.
2. **A 10 MB Messages document.** ``/healthz`` is asked every 20 ms, first with the server idle
   (the baseline, in the same run), then while one ``POST /v1/messages`` carries a 10 MB text
   document; p50/p95/max of both, and their ratio. The Messages request's own status and time.
3. **Text that is not UTF-8.** The bytes of an encoded surrogate (``ED A0 80``) in a form field,
   a file name and a JSON string, on each route that takes them, and in a field sent after a
   streamed file: the status, the field the error names, and what was stored. Then the cost of
   reading a form twice: the check alone over a valid 8 MB form, beside the server reading the
   same form (refused once read, for its purpose: nothing is ingested).

    .venv/bin/python bench/hostile.py
    .venv/bin/python bench/hostile.py --document-mb 5 --polls 200
"""

from __future__ import annotations

import argparse
import io
import json
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pypdfium2

from citewell.api.form_text import FormTextCheck
from citewell.evaluate.runner import serving
from common import evaldata_dir, machine, percentile, reproduce_line, table

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def blank_pdf(pages: int) -> bytes:
    document = pypdfium2.PdfDocument.new()
    for _ in range(pages):
        document.new_page(612, 792)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def two_scans(documents: Path) -> bytes:
    merged = pypdfium2.PdfDocument.new()
    for name in ("docling_ocr_test.pdf", "ocrmypdf_linn.pdf"):
        merged.import_pages(pypdfium2.PdfDocument(documents / "pdf_scanned" / name))
    buffer = io.BytesIO()
    merged.save(buffer)
    return buffer.getvalue()


def server_pid(url: str) -> int:
    """The pid of the process listening on the URL's port (the server ``serving`` started)."""
    port = int(url.rsplit(":", 1)[1])
    inode = next(
        line.split()[9]
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
        if int(line.split()[1].split(":")[1], 16) == port and line.split()[3] == "0A"
    )
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if any(
                os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]"
                for fd in os.listdir(f"/proc/{pid}/fd")
            ):
                return int(pid)
        except OSError:
            continue
    raise RuntimeError(f"no process listens on {url}")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


@contextmanager
def polled_health(url: str, every: float) -> Iterator[list[float]]:
    """``/healthz`` latencies, in ms, collected until the block ends."""
    latencies: list[float] = []
    stop = threading.Event()

    def poll() -> None:
        with httpx.Client(base_url=url, timeout=60) as client:
            while not stop.is_set():
                started = time.perf_counter()
                client.get("/healthz").raise_for_status()
                latencies.append((time.perf_counter() - started) * 1000)
                stop.wait(every)

    thread = threading.Thread(target=poll)
    thread.start()
    try:
        yield latencies
    finally:
        stop.set()
        thread.join()


def blank_pages(client: httpx.Client, pid: int, documents: Path) -> list[list[object]]:
    client.post("/v1/buckets", json={"slug": "hostile"}).raise_for_status()
    pdf = blank_pdf(2000)
    before, started = cpu_seconds(pid), time.perf_counter()
    sent = client.post("/v1/buckets/hostile/sources", files={"file": ("blank.pdf", pdf)})
    wall, cpu = time.perf_counter() - started, cpu_seconds(pid) - before
    rows: list[list[object]] = [
        [
            f"2,000 blank pages ({len(pdf) // 1024} KB)",
            sent.status_code,
            f"{wall:.2f}",
            f"{cpu:.2f}",
        ]
    ]
    scan = client.post(
        "/v1/buckets/hostile/sources", files={"file": ("scan.pdf", two_scans(documents))}
    )
    source_id = scan.json()["source"]["id"]
    started = time.perf_counter()
    deleted = client.delete(f"/v1/sources/{source_id}")
    wall = time.perf_counter() - started
    time.sleep(15)  # longer than OCR of the page begun
    left = client.get("/v1/buckets/hostile/sources").json()["data"]
    gone = client.get(f"/v1/sources/{source_id}").status_code
    rows.append(
        [
            f"a 2-page scan deleted while {scan.json()['source']['status']}",
            deleted.status_code,
            f"{wall:.2f}",
            f"left after: {[s['filename'] for s in left]}, GET {gone}",
        ]
    )
    return rows


def messages_document(url: str, megabytes: float, polls: int, every: float) -> list[list[object]]:
    sentence = "The co-op's workshop opens at nine and closes at six on weekdays. "
    text = sentence * int(megabytes * 1_000_000 / len(sentence))
    body = {
        "model": "citewell-agent",
        "max_tokens": 200,
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": text},
                        "citations": {"enabled": True},
                    },
                    {"type": "text", "text": "When does the workshop open?"},
                ],
            }
        ],
    }
    payload = json.dumps(body).encode()
    rows: list[list[object]] = []
    with polled_health(url, every) as idle:
        while len(idle) < polls:
            time.sleep(every)
    outcome: dict[str, object] = {}

    def send() -> None:
        started = time.perf_counter()
        with httpx.Client(base_url=url, timeout=600) as client:
            response = client.post(
                "/v1/messages",
                content=payload,
                headers={"content-type": "application/json", "anthropic-version": "2023-06-01"},
            )
        outcome.update(status=response.status_code, seconds=time.perf_counter() - started)

    sender = threading.Thread(target=send)
    with polled_health(url, every) as loaded:
        sender.start()
        sender.join()
    for name, latencies in (("idle (baseline)", idle), ("during the request", loaded)):
        rows.append(
            [
                name,
                len(latencies),
                f"{percentile(latencies, 50):.1f}",
                f"{percentile(latencies, 95):.1f}",
                f"{max(latencies):.1f}",
            ]
        )
    ratio = percentile(loaded, 95) / percentile(idle, 95)
    rows.append(
        [
            f"Messages request ({len(payload) / 1e6:.1f} MB): {outcome['status']}, "
            f"{outcome['seconds']:.1f} s; p95 ratio {ratio:.2f}",
            "",
            "",
            "",
            "",
        ]
    )
    return rows


BAD = b"\xed\xa0\x80"
BOUNDARY = "hostile-boundary"
MULTIPART = {"content-type": f"multipart/form-data; boundary={BOUNDARY}"}


def form(*parts: tuple[bytes, bytes]) -> bytes:
    """A multipart body of (Content-Disposition parameters, content) parts, as raw bytes."""
    head = f"--{BOUNDARY}\r\nContent-Disposition: form-data; ".encode()
    body = b"".join(
        head + disposition + b"\r\n\r\n" + data + b"\r\n" for disposition, data in parts
    )
    return body + f"--{BOUNDARY}--\r\n".encode()


def streamed(file: bytes, tail: bytes) -> Iterator[bytes]:
    """A form streamed in 64 KB chunks: a file, then ``tail`` (the parts after it)."""
    body = form((b'name="file"; filename="big.txt"', file)).removesuffix(
        f"--{BOUNDARY}--\r\n".encode()
    )
    body += tail
    for start in range(0, len(body), 65536):
        yield body[start : start + 65536]


def stored(client: httpx.Client) -> int:
    """Sources, files and vector stores the server lists."""
    paths = ("/v1/buckets/bytes/sources", "/v1/files", "/v1/vector_stores")
    return sum(len(client.get(path).json()["data"]) for path in paths)


def not_utf8(client: httpx.Client, megabytes: float) -> list[list[object]]:
    client.post("/v1/buckets", json={"slug": "bytes"}).raise_for_status()
    note = (b'name="file"; filename="note.txt"', b"Refunds take thirty days.")
    big = b"Refunds take thirty days. " * int(megabytes * 1_000_000 / 26)
    tail = form((b'name="metadata"', b'{"k": "' + BAD + b'"}'))
    requests: dict[str, dict[str, object]] = {
        "an upload's metadata": {
            "url": "/v1/buckets/bytes/sources",
            "content": form(note, (b'name="metadata"', b'{"k": "' + BAD + b'"}')),
            "headers": MULTIPART,
        },
        "an upload's file name": {
            "url": "/v1/buckets/bytes/sources",
            "content": form((b'name="file"; filename="n' + BAD + b'.txt"', note[1])),
            "headers": MULTIPART,
        },
        "a file's purpose (/v1/files)": {
            "url": "/v1/files",
            "content": form(note, (b'name="purpose"', b"assistants" + BAD)),
            "headers": MULTIPART,
        },
        f"metadata after a streamed {len(big) / 1e6:.1f} MB file": {
            "url": "/v1/buckets/bytes/sources",
            "content": streamed(big, tail),
            "headers": MULTIPART,
        },
        "a vector store's metadata (JSON)": {
            "url": "/v1/vector_stores",
            "content": b'{"name": "v", "metadata": {"k": "' + BAD + b'"}}',
            "headers": {"content-type": "application/json"},
        },
        "a Messages question (JSON)": {
            "url": "/v1/messages",
            "content": b'{"model": "citewell-agent", "max_tokens": 50, "messages": '
            b'[{"role": "user", "content": "Refunds' + BAD + b'?"}]}',
            "headers": {"content-type": "application/json", "anthropic-version": "2023-06-01"},
        },
    }
    rows: list[list[object]] = []
    before = stored(client)
    for name, request in requests.items():
        started = time.perf_counter()
        response = client.request("POST", **request)  # type: ignore[arg-type]
        wall = time.perf_counter() - started
        error = response.json().get("error", {})
        named = error.get("param") or error.get("message", "")[:40]
        rows.append([name, response.status_code, named, stored(client) - before, f"{wall:.2f}"])
    # The check's cost: alone over a valid form, beside the server reading the same form (and
    # refusing it once read, for its purpose: nothing is ingested).
    valid = form((b'name="file"; filename="big.txt"', big), (b'name="purpose"', b"nope"))
    started = time.perf_counter()
    check = FormTextCheck(MULTIPART["content-type"].encode())
    for start in range(0, len(valid), 65536):
        check.feed(valid[start : start + 65536], last=start + 65536 >= len(valid))
    checked = time.perf_counter() - started
    started = time.perf_counter()
    read = client.post("/v1/files", content=valid, headers=MULTIPART)
    wall = time.perf_counter() - started
    rows.append(
        [
            f"the check alone over a valid {len(valid) / 1e6:.1f} MB form",
            f"({read.status_code})",
            "-",
            "-",
            f"{checked:.3f} ({checked / wall:.1%} of the server reading it, {wall:.2f} s)",
        ]
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--document-mb", type=float, default=9.9)
    parser.add_argument("--polls", type=int, default=100, help="idle /healthz polls")
    parser.add_argument("--every", type=float, default=0.02, help="seconds between polls")
    parser.add_argument("--upload-mb", type=float, default=8.0, help="the streamed upload's size")
    args = parser.parse_args()
    documents = evaldata_dir() / "documents"
    env = {**os.environ, "CITEWELL_RETRIEVE__EMBEDDER": "use", "CITEWELL_OCR__WORKERS": "1"}
    with (
        tempfile.TemporaryDirectory(prefix="citewell-hostile-") as folder,
        serving(Path(folder) / "data", env=env) as url,
    ):
        pid = server_pid(url)
        with httpx.Client(base_url=url, timeout=600) as client:
            pages = blank_pages(client, pid, documents)
            text = not_utf8(client, args.upload_mb)
        health = messages_document(url, args.document_mb, args.polls, args.every)
    print(machine())
    print(table(pages, ["upload", "status", "wall s", "server CPU s / after"]))
    print()
    print(table(health, ["/healthz", "polls", "p50 ms", "p95 ms", "max ms"]))
    print()
    header = ["bytes ED A0 80 in", "status", "error's param (or message)", "stored", "wall s"]
    print(table(text, header))
    print(reproduce_line())


if __name__ == "__main__":
    main()
