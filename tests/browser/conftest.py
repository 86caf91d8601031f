"""The browser tests' world: a real citewell server (a process, over HTTP, with an operator key)
and Debian's Chromium driven by Playwright, with helpers that act as a person would.

The server and the browser are started once for the whole folder (starting the server loads
the embedder); each test gets a fresh browser context, so no key, tab or storage carries over.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, Response, sync_playwright

from tests.generate.llm_server import LlamaServer, llama_missing, llama_server

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ADMIN = "browser-tests-operator-key"
REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = Path(
    os.environ.get("CITEWELL_SCREENSHOTS_DIR", REPO / "tests" / "artifacts" / "screenshots")
)
"""Where the tests leave pictures of the main states (``make screenshots``: docs/screenshots)."""

# A question the 5-page essay answers on page 3 (the answer is an item of a bulleted list).
LATEX = "Which tools gained popularity among academics, scientists, and engineers?"
LATEX_PAGE = 3


@dataclass
class Server:
    url: str

    def api(self, method: str, path: str, *, key: str = ADMIN, **kwargs: Any) -> Any:
        """One API call as the operator (or ``key``); its JSON, after checking it succeeded."""
        headers = {"authorization": f"Bearer {key}"}
        response = httpx.request(method, self.url + path, headers=headers, timeout=120, **kwargs)
        assert response.is_success, response.text
        return response.json()

    def bucket_with(self, slug: str, *files: Path) -> str:
        """A bucket holding ``files`` (added through the API, not the UI); its slug."""
        self.api("POST", "/v1/buckets", json={"slug": slug})
        for path in files:
            self.api(
                "POST",
                f"/v1/buckets/{slug}/sources",
                files={"file": (path.name, path.read_bytes())},
            )
        return slug

    def key(self, *permissions: str, **body: Any) -> str:
        """A new key with these permissions; its secret."""
        made = self.api("POST", "/v1/keys", json={"permissions": list(permissions), **body})
        secret: str = made["secret"]
        return secret


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="package")
def local_model() -> Iterator[LlamaServer | None]:
    """The real local model server (SmolLM2 on llama.cpp), or None where ``make llm`` has not
    set it up."""
    if llama_missing() is not None:
        yield None
        return
    with llama_server() as started:
        yield started


@pytest.fixture(scope="package")
def server(
    tmp_path_factory: pytest.TempPathFactory, local_model: LlamaServer | None
) -> Iterator[Server]:
    env = {}
    if local_model is not None:
        env["CITEWELL_GENERATE__OPENAI__BASE_URL"] = local_model.base_url
        env["CITEWELL_GENERATE__OPENAI__MODEL"] = local_model.model
    with ui_server(tmp_path_factory.mktemp("ui-server"), env) as started:
        yield started


@contextmanager
def ui_server(folder: Path, env: Mapping[str, str]) -> Iterator[Server]:
    """``ui_server.py`` on a fresh data folder in ``folder``, with ``env`` over this process's
    environment and the operator key; stopped at the end."""
    port, log = free_port(), folder / "server.log"
    url = f"http://127.0.0.1:{port}"
    script = Path(__file__).with_name("ui_server.py")
    environment = {**os.environ, "CITEWELL_ADMIN_KEY": ADMIN, **env}
    with log.open("w") as sink:
        process = subprocess.Popen(
            [sys.executable, str(script), str(folder / "data"), str(port)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=environment,
        )
    try:
        wait_healthy(url, process, log)
        yield Server(url)
    finally:
        process.terminate()
        process.wait(timeout=30)


def wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while True:
        assert process.poll() is None, f"the server exited:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"the server did not start:\n{log.read_text()}"
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: `make chromium` installs Debian's chromium")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh tab in a fresh context; the test fails if the page's scripts throw."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(60_000)  # two cores, shared with other test runs
    tab = context.new_page()
    thrown: list[str] = []
    tab.on("pageerror", lambda error: thrown.append(str(error)))
    yield tab
    context.close()
    assert not thrown, f"the page threw: {thrown}"


@pytest.fixture(scope="package")
def essays(server: Server, evaldata: Path) -> str:
    """A bucket holding the 5-page essay on word processors (text PDF)."""
    return server.bucket_with("essays", evaldata / "documents" / "pdf_text" / "multi_page.pdf")


def sign_in(page: Page, server: Server, key: str = ADMIN) -> None:
    """Open the UI and sign in with ``key``; returns once the workspace shows."""
    page.goto(server.url)
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    page.locator("#workspace").wait_for()


def choose_bucket(page: Page, slug: str) -> None:
    page.locator(f'#bucket option[value="{slug}"]').wait_for(state="attached")
    page.get_by_label("Bucket", exact=True).select_option(slug)


def ask(page: Page, question: str, *, bucket: str, agent: str | None = None) -> str:
    """Ask as a person does; returns the SSE body the page received, once the answer is done."""
    choose_bucket(page, bucket)
    if agent:
        page.get_by_label("Agent").select_option(agent)
    page.get_by_label("Your question").fill(question)
    with page.expect_response(lambda r: r.url.endswith("/v1/responses")) as answered:
        page.get_by_role("button", name="Ask", exact=True).click()
    page.locator('#answer[aria-busy="false"]').wait_for()
    response: Response = answered.value
    return response.text()


def stream_of(body: str) -> list[dict[str, Any]]:
    """The events of an SSE body, parsed."""
    return [
        json.loads(line[len("data: ") :]) for line in body.splitlines() if line.startswith("data: ")
    ]


def screenshot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / f"{name}.png")


# Each badge with the claim right before it (only other badges of the same claim between them,
# and no text at all): what a reader sees the number attached to.
BADGES = """() => [...document.querySelectorAll("#answer-text .badge")].map((badge) => {
  let before = badge.previousSibling;
  while (before && before.nodeType === 1 && before.classList.contains("badge")) {
    before = before.previousSibling;
  }
  const isClaim = before && before.nodeType === 1 && before.classList.contains("claim");
  const claim = isClaim ? before : null;
  return {
    number: badge.textContent,
    label: badge.getAttribute("aria-label"),
    claim: claim && {text: claim.textContent, start: +claim.dataset.start, end: +claim.dataset.end},
  };
})"""

# The answer as a reader sees it, without the badges' numbers.
ANSWER_TEXT = """() => {
  const copy = document.querySelector("#answer-text").cloneNode(true);
  copy.querySelectorAll(".badge").forEach((badge) => badge.remove());
  return copy.textContent;
}"""


def answer_parts(body: str) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """(text, annotations, final response) of a streamed answer, from its events."""
    events = stream_of(body)
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    added = "response.output_text.annotation.added"
    annotations = [e["annotation"] for e in events if e["type"] == added]
    [completed] = [e["response"] for e in events if e["type"] == "response.completed"]
    return text, annotations, completed


def check_badges(page: Page, text: str, annotations: list[dict[str, Any]]) -> None:
    """One badge per annotation, in order, each right after the claim it cites."""
    badges = page.evaluate(BADGES)
    assert len(badges) == len(annotations) > 0
    for badge, note in zip(badges, annotations, strict=True):
        start, end = note["start_index"], note["end_index"]
        assert badge["claim"] == {"text": text[start:end], "start": start, "end": end}
        assert badge["number"] == str(note["source_index"])
        page_part = f", page {note['page_number']}" if note["page_number"] else ""
        assert badge["label"] == f"Source {note['source_index']}: {note['filename']}{page_part}"
    assert page.evaluate(ANSWER_TEXT) == text
