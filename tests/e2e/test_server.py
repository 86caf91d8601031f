"""The real server, as a process, over real HTTP: upload, search, hostile requests, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CITEWELL = str(Path(sys.executable).parent / "citewell")
MAX_FILE_BYTES = 500_000


@dataclass
class Server:
    process: subprocess.Popen[str]
    url: str
    log: Path

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60)

    def stop(self) -> int:
        """Ctrl-C, then the exit code."""
        self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def launched(
    data_dir: Path, *args: str, log: Path, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """``citewell serve ARGS`` with the fast embedder; killed at the end if still running."""
    env = {
        **os.environ,
        "CITEWELL_RETRIEVE__EMBEDDER": "use",
        "CITEWELL_INGEST__MAX_FILE_BYTES": str(MAX_FILE_BYTES),
        **(env or {}),
    }
    with log.open("w") as sink:
        process = subprocess.Popen(
            [CITEWELL, "serve", "--data-dir", str(data_dir), *args],
            stdout=subprocess.PIPE,
            stderr=sink,
            text=True,
            env=env,
        )
    with process:  # closes the pipe and reaps the process
        try:
            yield process
        finally:
            if process.poll() is None:
                process.kill()


def wait_healthy(url: str, process: subprocess.Popen[str], log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).json() == {"status": "ok"}:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"the server did not become healthy:\n{log.read_text()}")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    port = free_port()
    log = tmp_path / "server.log"
    with launched(tmp_path / "data", "--port", str(port), log=log) as process:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, process, log)
        yield Server(process, url, log)


def read_line(stream: IO[str] | None) -> str:
    assert stream is not None
    return stream.readline().rstrip("\n")


def test_upload_then_search_over_http(server: Server, documents: Path) -> None:
    pdf = (documents / "pdf_text" / "multi_page.pdf").read_bytes()
    with server.client() as client:
        assert client.post("/v1/buckets", json={"slug": "essays"}).status_code == 201
        response = client.post(
            "/v1/buckets/essays/sources",
            files={"file": ("multi_page.pdf", pdf, "application/pdf")},
            data={"metadata": '{"topic": "history"}'},
        )
        assert response.status_code == 201, response.text
        source = response.json()["source"]
        assert (source["page_count"], source["metadata"]) == (5, {"topic": "history"})

        found = client.post(
            "/v1/search",
            json={"query": "MacWrite Macintosh graphical capabilities", "buckets": ["essays"]},
        ).json()["data"]
        text = client.get(f"/v1/sources/{source['id']}/text").json()["text"]
    result = next(r for r in found if any("MacWrite" in s["text"] for s in r["sentences"]))
    sentence = next(s for s in result["sentences"] if "MacWrite" in s["text"])
    assert sentence["page_number"] == 2
    assert text[sentence["start"] : sentence["end"]] == sentence["text"]
    assert text[result["span"]["start"] : result["span"]["end"]] == result["text"]


def chunked(head: bytes, size: int, tail: bytes) -> Iterator[bytes]:
    yield head
    for _ in range(size // 65536):
        yield b"x" * 65536
    yield tail


BOUNDARY = "e2e-boundary"
MULTIPART = {"content-type": f"multipart/form-data; boundary={BOUNDARY}"}
FILE_HEAD = (
    f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="big.txt"\r\n\r\n'
).encode()
FILE_TAIL = f"\r\n--{BOUNDARY}--\r\n".encode()
JSON = {"content-type": "application/json"}
NOT_UTF8 = b"\xed\xa0\x80"
"""An encoded surrogate: bytes that are not UTF-8 (Latin-1 would read them as 'í\\xa0\\x80')."""
METADATA_NOT_UTF8 = (
    f'\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name="metadata"\r\n\r\n'.encode()
    + b'{"k": "'
    + NOT_UTF8
    + b'"}'
    + FILE_TAIL
)


def nested_filter(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "eq", "key": "topic", "value": "history"}
    for _ in range(depth):
        node = {"type": "and", "filters": [node]}
    return node


HOSTILE: dict[str, tuple[dict[str, Any], set[int]]] = {
    "huge JSON body": (
        {
            "url": "/v1/search",
            "content": b'{"query": "' + b"a" * 8_000_000 + b'"}',
            "headers": JSON,
        },
        {413},
    ),
    "huge JSON body without a length": (
        {
            "url": "/v1/search",
            "content": chunked(b'{"query": "', 8_000_000, b'"}'),
            "headers": JSON,
        },
        {413},
    ),
    "invalid UTF-8 in JSON": (
        {
            "url": "/v1/search",
            "content": b'{"query": "\xc3\x28", "buckets": ["notes"]}',
            "headers": JSON,
        },
        {400},
    ),
    "a 50-level nested filter": (
        {
            "url": "/v1/search",
            "json": {"query": "history", "buckets": ["notes"], "filters": nested_filter(50)},
        },
        {400},
    ),
    "JSON nested 100,000 levels": (
        {"url": "/v1/search", "content": b"[" * 100_000, "headers": JSON},
        {400},
    ),
    "wrong types": (
        {
            "url": "/v1/search",
            "json": {"query": ["history"], "buckets": "notes", "max_results": "ten"},
        },
        {400},
    ),
    "a file over the limit": (
        {
            "url": "/v1/buckets/notes/sources",
            "files": {"file": ("big.txt", b"x" * 2 * MAX_FILE_BYTES)},
        },
        {413},
    ),
    "a file over the limit without a length": (
        {
            "url": "/v1/buckets/notes/sources",
            "content": chunked(FILE_HEAD, 4 * MAX_FILE_BYTES, FILE_TAIL),
            "headers": MULTIPART,
        },
        {413},
    ),
    "a broken multipart body": (
        {"url": "/v1/buckets/notes/sources", "content": b"--nope\r\n\r\n", "headers": MULTIPART},
        {400},
    ),
    "bytes that are not UTF-8 in an upload's metadata": (
        {
            "url": "/v1/buckets/notes/sources",
            "content": FILE_HEAD + b"Gift cards never expire." + METADATA_NOT_UTF8,
            "headers": MULTIPART,
        },
        {400},
    ),
    "bytes that are not UTF-8 in a field after a streamed file": (
        {
            "url": "/v1/buckets/notes/sources",
            "content": chunked(FILE_HEAD, MAX_FILE_BYTES - 100_000, METADATA_NOT_UTF8),
            "headers": MULTIPART,
        },
        {400},
    ),
    "a file name that is not UTF-8": (
        {
            "url": "/v1/buckets/notes/sources",
            "content": FILE_HEAD.replace(b"big.txt", b"big" + NOT_UTF8 + b".txt")
            + b"Gift cards never expire."
            + FILE_TAIL,
            "headers": MULTIPART,
        },
        {400},
    ),
    "a damaged PDF": (
        {"url": "/v1/buckets/notes/sources", "files": {"file": ("x.pdf", b"%PDF-1.7\n%%garbage")}},
        {422},
    ),
    "a signed-link token with non-ASCII text": (
        {"method": "GET", "url": "/v1/links/abc.%C3%A9"},
        {403},
    ),
    "an API key with non-ASCII text": (
        {
            "method": "GET",
            "url": "/v1/buckets",
            "headers": {"authorization": b"Bearer cwk_\xc3\xa9"},
        },
        {401},
    ),
    "an unpaired surrogate in a JSON body": (
        {
            "url": "/v1/search",
            "content": b'{"query": "\\ud800", "buckets": ["notes"]}',
            "headers": JSON,
        },
        {400},
    ),
    "an unpaired surrogate in an upload's metadata": (
        {
            "url": "/v1/buckets/notes/sources",
            "files": {"file": ("other.txt", b"Gift cards never expire.")},
            "data": {"metadata": '{"k": "\\udc00"}'},
        },
        {400},
    ),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_the_server_keeps_serving_after_a_hostile_request(server: Server, name: str) -> None:
    request, statuses = dict(HOSTILE[name][0]), HOSTILE[name][1]
    with server.client() as client:
        client.post("/v1/buckets", json={"slug": "notes"})
        upload = client.post(
            "/v1/buckets/notes/sources", files={"file": ("note.txt", b"Refunds take thirty days.")}
        )
        assert upload.status_code == 201
        response = client.request(request.pop("method", "POST"), **request)
        assert response.status_code in statuses, response.text
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        # Still serving, with the store as it was.
        assert client.get("/healthz").json() == {"status": "ok"}
        found = client.post("/v1/search", json={"query": "refunds", "buckets": ["notes"]}).json()
        assert [r["text"] for r in found["data"]] == ["Refunds take thirty days."]
        sources = client.get("/v1/buckets/notes/sources").json()["data"]
        assert [s["filename"] for s in sources] == ["note.txt"]
    assert "Traceback" not in server.log.read_text()


def test_ctrl_c_stops_the_server_cleanly(server: Server) -> None:
    with server.client() as client:
        client.post("/v1/buckets", json={"slug": "notes"})
    assert server.stop() == 0
    log = server.log.read_text()
    assert "Application shutdown complete" in log
    assert "Traceback" not in log


def test_serve_demo_prints_the_url_and_serves_the_demo_bucket(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    for run in range(2):  # the second start finds the demo already loaded
        with launched(tmp_path / "data", "--demo", "--port", "0", log=log) as process:
            assert read_line(process.stdout) == "demo bucket 'demo': 4 documents"
            announced = read_line(process.stdout)
            assert announced.startswith("citewell is serving at http://127.0.0.1:")
            server = Server(process, announced.rsplit(" ", 1)[1], log)
            ui = f"{server.url}/"
            assert read_line(process.stdout) == (
                f"open {ui} in a browser to ask, read and check the sources"
            )
            with server.client() as client:
                assert client.get("/healthz").status_code == 200
                assert "<title>citewell</title>" in client.get(ui).text
                sources = client.get("/v1/buckets/demo/sources").json()["data"]
                assert len(sources) == 4
                found = client.post(
                    "/v1/search", json={"query": "采茶体验", "buckets": ["demo"], "max_results": 1}
                ).json()["data"]
            assert found[0]["filename"] == "tea-garden-notes.txt"
            assert server.stop() == 0, f"run {run}"


def test_the_demo_documents_cover_four_formats_and_three_languages() -> None:
    from citewell.demo import demo_documents

    documents = dict(demo_documents())
    assert sorted(Path(name).suffix for name in documents) == [".csv", ".html", ".md", ".txt"]
    text = b"".join(documents.values()).decode()
    assert "Refunds" in text and "préstamo" in text and "茶园" in text
    assert json.dumps(sorted(documents))  # plain file names, nothing nested


@pytest.mark.parametrize(
    ("args", "status", "words"),
    [
        ((), 200, "The Tigers won the 1998 final."),
        (
            ("--generator", "openai-compatible", "--model", "smollm2"),
            502,
            "CITEWELL_GENERATE__OPENAI__BASE_URL",
        ),
    ],
)
def test_serve_chooses_the_default_agents_generator(
    tmp_path: Path, args: tuple[str, ...], status: int, words: str
) -> None:
    """By default the extractive generator answers; ``--generator`` names another, here one
    whose endpoint is not configured, so the answer fails, naming the missing setting."""
    port, log = free_port(), tmp_path / "server.log"
    with launched(tmp_path / "data", "--port", str(port), *args, log=log) as process:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, process, log)
        with httpx.Client(base_url=url, timeout=60) as client:
            assert client.post("/v1/buckets", json={"slug": "notes"}).status_code == 201
            note = {"file": ("final.txt", b"The Tigers won the 1998 final.")}
            assert client.post("/v1/buckets/notes/sources", files=note).status_code == 201
            response = client.post("/v1/responses", json={"input": "Who won the 1998 final?"})
    assert response.status_code == status, response.text
    assert words in response.text


def test_a_keyed_server_answers_keys_only_and_logs_no_document_text(
    tmp_path: Path, documents: Path
) -> None:
    import anthropic
    import openai

    log = tmp_path / "server.log"
    operator = {"authorization": "Bearer operator-e2e"}
    env = {"CITEWELL_ADMIN_KEY": "operator-e2e"}
    with launched(tmp_path / "data", "--port", "0", log=log, env=env) as process:
        url = read_line(process.stdout).rsplit(" ", 1)[1]
        with httpx.Client(base_url=url, timeout=60) as client:
            assert client.get("/v1/buckets").status_code == 401
            tenant = client.post("/v1/tenants", json={"name": "Acme"}, headers=operator).json()
            made = client.post(
                "/v1/keys",
                json={
                    "tenant_id": tenant["id"],
                    "permissions": ["ask", "search", "ingest", "manage"],
                },
                headers=operator,
            ).json()
            headers = {"authorization": f"Bearer {made['secret']}"}
            assert (
                client.post("/v1/buckets", json={"slug": "essays"}, headers=headers).status_code
                == 201
            )
            pdf = (documents / "pdf_text" / "multi_page.pdf").read_bytes()
            sent = client.post(
                "/v1/buckets/essays/sources",
                files={"file": ("multi_page.pdf", pdf, "application/pdf")},
                headers=headers,
            )
            assert sent.status_code == 201, sent.text
            with pytest.raises(openai.AuthenticationError):
                openai.OpenAI(api_key="sk-wrong", base_url=f"{url}/v1").models.list()
            answer = openai.OpenAI(api_key=made["secret"], base_url=f"{url}/v1").responses.create(
                model="citewell-agent",
                input="Which program showed the Macintosh's graphical capabilities?",
                include=["file_search_call.results"],
            )
            [search, message] = answer.output
            cited = message.content[0].annotations  # type: ignore[union-attr]
            assert cited and cited[0].filename == "multi_page.pdf"  # type: ignore[union-attr]
            link = search.results[0].attributes["access_url"]  # type: ignore[union-attr,index]
            assert httpx.get(str(link)).content == pdf  # no key needed: the link is signed
            reply = anthropic.Anthropic(api_key=made["secret"], base_url=url).messages.create(
                model="citewell-agent",
                max_tokens=200,
                messages=[{"role": "user", "content": "Which program showed the graphics?"}],
            )
            assert reply.content
            assert client.delete(f"/v1/keys/{made['id']}", headers=operator).status_code == 200
            assert client.get("/v1/buckets", headers=headers).status_code == 401
            assert httpx.get(str(link)).status_code == 403  # a revoked key's links die
        assert Server(process, url, log).stop() == 0
        assert process.stdout is not None
        logged = log.read_text() + process.stdout.read()  # stderr, then the access log
    assert '"GET /v1/buckets HTTP/1.1" 401' in logged  # what was logged is all here
    assert "MacWrite" not in logged and "Macintosh" not in logged
