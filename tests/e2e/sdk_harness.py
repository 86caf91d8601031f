"""What the SDK end-to-end files share: a real citewell server in a subprocess, holding the co-op
handbook (Markdown) and a 5-page PDF in the bucket ``coop``, and plain HTTP to reach it.

Standard library only: the files also run in venvs that hold nothing but one SDK release and
pytest (``make test``, ``--noconftest``), while the server runs on the main venv's python
(``CITEWELL_SERVER_PYTHON``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HANDBOOK = REPO / "src" / "citewell" / "demo" / "documents" / "bike-coop-handbook.md"
BUCKET = "coop"


def server_python() -> str:
    explicit = os.environ.get("CITEWELL_SERVER_PYTHON")
    if explicit:
        return explicit
    if importlib.util.find_spec("citewell") is not None:
        return sys.executable
    return str(REPO / ".venv" / "bin" / "python")


def evaldata() -> Path:
    return Path(os.environ.get("CITEWELL_EVALDATA_DIR", REPO.parent / "shared" / "evaldata"))


def multi_page_pdf() -> Path:
    return evaldata() / "documents" / "pdf_text" / "multi_page.pdf"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def http(
    method: str,
    url: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    *,
    timeout: float = 60,
) -> tuple[int, dict[str, str], bytes]:
    """One plain HTTP exchange: (status, headers, body), error statuses included."""
    request = urllib.request.Request(url, data=body, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def upload(url: str, path: Path) -> dict[str, Any]:
    """POST ``path`` as the multipart field ``file``; the created object."""
    boundary = "citewell-e2e-boundary"
    head = (
        f"--{boundary}\r\n"
        f'Content-Disposition: form-data; name="file"; filename="{path.name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    )
    body = head.encode() + path.read_bytes() + f"\r\n--{boundary}--\r\n".encode()
    headers = {"content-type": f"multipart/form-data; boundary={boundary}"}
    status, _, data = http("POST", url, body, headers)
    assert status == 201, data
    created: dict[str, Any] = json.loads(data)
    return created


@contextmanager
def running_server(folder: Path) -> Iterator[str]:
    """A server on a free port with its data in ``folder``, the bucket filled; its base URL."""
    port, log = free_port(), folder / "server.log"
    url = f"http://127.0.0.1:{port}"
    script = Path(__file__).with_name("sdk_server.py")
    with log.open("w") as sink:
        process = subprocess.Popen(
            [server_python(), str(script), str(folder / "data"), str(port)],
            # As tests/conftest.py sets it, which these runs do not load (--noconftest): the
            # answers specified here are word overlap's.
            env={"CITEWELL_READ__READER": "lexical", **os.environ},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, f"the server exited:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"the server did not start:\n{log.read_text()}"
            try:
                if http("GET", f"{url}/healthz", timeout=1)[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        created = json.dumps({"slug": BUCKET}).encode()
        status, _, data = http(
            "POST", f"{url}/v1/buckets", created, {"content-type": "application/json"}
        )
        assert status == 201, data
        for path in (HANDBOOK, multi_page_pdf()):
            upload(f"{url}/v1/buckets/{BUCKET}/sources", path)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
