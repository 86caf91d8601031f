"""Running a data set through a real server: ingest its documents over HTTP, ask every case
through one surface with the official SDK, and collect what came back.

The server is one already running (``url``) or one started here (``serving``: ``citewell serve
--port 0`` on a fresh data folder). Each bucket of the data set is created on the server and its
documents uploaded (``POST /v1/buckets/{bucket}/sources``); the server's canonical text of each
is read back, and the gold ranges are moved onto it (``loaders.restated``: line ends, a byte-order
mark and NUL characters are what the text parser changes).

Surfaces: ``responses`` (``POST /v1/responses`` with a ``file_search`` tool naming the case's
bucket, and ``include=["file_search_call.results"]``: the only surface that shows what was
retrieved); ``chat`` (``POST /v1/chat/completions``) and ``messages`` (``POST /v1/messages``),
which answer from the agent's buckets, so they run one bucket at a time.
"""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import httpx

from citewell.cite.writer import REFUSALS
from citewell.evaluate.loaders import Case, DataSet, restated, uploadable
from citewell.evaluate.metrics import Cited, Outcome

__all__ = ["SURFACES", "Asker", "ask_all", "ingest", "make_asker", "serving"]

Surface = Literal["responses", "chat", "messages"]
SURFACES: tuple[Surface, ...] = ("responses", "chat", "messages")
Asker = Callable[[Case], Outcome]


@contextmanager
def serving(
    data_dir: Path,
    *,
    generator: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> Iterator[str]:
    """``citewell serve --port 0 --data-dir DATA_DIR [--generator GENERATOR]`` in a subprocess:
    yields its URL once it prints "citewell is serving at", and stops it afterwards. ``env``
    replaces the process's environment (default: this process's), which is where a generator's
    settings (``CITEWELL_GENERATE__…``) come from."""
    command = [
        str(Path(sys.executable).with_name("citewell")),
        "serve",
        "--port",
        "0",
        "--data-dir",
        str(data_dir),
        *(["--generator", generator] if generator else []),
    ]
    process = subprocess.Popen(
        command,
        env=dict(env if env is not None else os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:  # drains the pipe for the server's whole life, so it never blocks
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(
                    f"citewell serve printed no URL in {timeout:.0f} s:\n{''.join(seen)}"
                ) from None
            if line is None:
                raise RuntimeError(f"citewell serve exited:\n{''.join(seen)}")
            seen.append(line)
            found = re.search(r"citewell is serving at (\S+)", line)
            if found:
                break
        yield found.group(1)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(timeout=10)  # it reads to the end of the pipe, which the exit closed
        if process.stdout is not None:
            process.stdout.close()


def ingest(
    data: DataSet,
    url: str,
    api_key: str,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[dict[str, str], DataSet]:
    """Creates each bucket and uploads its documents; returns bucket slug → bucket id, and
    ``data`` over the texts as the server stored them, gold ranges moved with them
    (``loaders.restated``).

    Raises ``RuntimeError`` if the server's canonical text of a document is more than the
    loader's normalised (its gold ranges could not be moved)."""
    headers = {"Authorization": f"Bearer {api_key}"}
    buckets: dict[str, str] = {}
    stored: dict[tuple[str, str], str] = {}
    with httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=600) as client:
        for slug in sorted({b for b, _ in data.documents} | {c.bucket for c in data.cases}):
            response = client.post("/v1/buckets", json={"slug": slug})
            response.raise_for_status()
            buckets[slug] = response.json()["id"]
        for done, ((slug, filename), document) in enumerate(sorted(data.documents.items())):
            files = {"file": (filename, uploadable(document.text).encode(), "text/plain")}
            dated = {"effective_date": document.effective_date} if document.effective_date else {}
            response = client.post(f"/v1/buckets/{slug}/sources", files=files, data=dated)
            response.raise_for_status()
            source = response.json()["source"]
            text = client.get(f"/v1/sources/{source['id']}/text").raise_for_status().json()["text"]
            stored[(slug, filename)] = text
            if progress:
                progress(done + 1, len(data.documents))
    try:
        return buckets, restated(data, stored)
    except ValueError as error:
        raise RuntimeError(str(error)) from None


def _declined(text: str) -> bool:
    return any(refusal in text for refusal in REFUSALS.values())


def make_asker(
    surface: Surface, url: str, api_key: str, buckets: Mapping[str, str], data: DataSet, model: str
) -> Asker:
    """A function asking one case through ``surface`` of the server at ``url``."""
    base = url.rstrip("/")
    if surface == "responses":
        return _responses(base, api_key, buckets, model)
    if surface == "chat":
        return _chat(base, api_key, model)
    return _messages(base, api_key, data, model)


def _responses(base: str, api_key: str, buckets: Mapping[str, str], model: str) -> Asker:
    import openai

    client = openai.OpenAI(base_url=base + "/v1", api_key=api_key, max_retries=0, timeout=300)

    def ask(case: Case) -> Outcome:
        tool: Any = {"type": "file_search", "vector_store_ids": [buckets[case.bucket]]}
        started = time.perf_counter()
        response = client.responses.create(
            model=model, input=case.question, tools=[tool], include=["file_search_call.results"]
        )
        ms = (time.perf_counter() - started) * 1000
        text, citations = "", []
        retrieved: list[tuple[str, str]] = []
        sides: list[tuple[str, str]] = []
        for item in response.output:
            if item.type == "file_search_call":
                for result in item.results or []:
                    retrieved.append((result.filename or "", result.text or ""))
                    side = (result.attributes or {}).get("conflict_side")
                    if isinstance(side, str):
                        sides.append((result.filename or "", side))
            if item.type != "message":
                continue
            for part in item.content:
                if part.type != "output_text":
                    continue
                offset = len(text)
                text += part.text
                for annotation in part.annotations:
                    if annotation.type != "file_citation":
                        continue
                    extra = annotation.model_extra or {}
                    citations.append(
                        Cited(
                            claim_start=offset + extra["start_index"],
                            claim_end=offset + extra["end_index"],
                            filename=annotation.filename,
                            start=extra["cited_start_index"],
                            end=extra["cited_end_index"],
                            cited_text=extra.get("cited_text") or "",
                            support=extra.get("support"),
                        )
                    )
        return Outcome(
            text,
            tuple(citations),
            _declined(text),
            tuple(retrieved),
            ms,
            conflict_sides=tuple(sides),
        )

    return ask


def _chat(base: str, api_key: str, model: str) -> Asker:
    import openai

    client = openai.OpenAI(base_url=base + "/v1", api_key=api_key, max_retries=0, timeout=300)

    def ask(case: Case) -> Outcome:
        started = time.perf_counter()
        completion = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": case.question}],
            metadata={"sources_appendix": "omit"},
        )
        ms = (time.perf_counter() - started) * 1000
        message = completion.choices[0].message
        text = message.content or ""
        citations = []
        for annotation in message.annotations or []:
            cited = annotation.url_citation
            extra = cited.model_extra or {}
            citations.append(
                Cited(
                    claim_start=cited.start_index,
                    claim_end=cited.end_index,
                    filename=cited.title,
                    start=extra.get("cited_start_index"),
                    end=extra.get("cited_end_index"),
                    cited_text=extra.get("cited_text") or "",
                    support=extra.get("support"),
                )
            )
        return Outcome(text, tuple(citations), _declined(text), None, ms)

    return ask


def _messages(base: str, api_key: str, data: DataSet, model: str) -> Asker:
    """Anthropic's search results name no source range: a citation's range is where its
    ``cited_text`` occurs in the cited document (first occurrence)."""
    import anthropic

    client = anthropic.Anthropic(base_url=base, api_key=api_key, max_retries=0, timeout=300)

    def ask(case: Case) -> Outcome:
        started = time.perf_counter()
        message = client.messages.create(
            model=model, max_tokens=1024, messages=[{"role": "user", "content": case.question}]
        )
        ms = (time.perf_counter() - started) * 1000
        text, citations = "", []
        for block in message.content:
            if block.type != "text":
                continue
            start = len(text)
            text += block.text
            for citation in block.citations or []:
                if citation.type != "search_result_location":
                    continue
                document = data.documents.get((case.bucket, citation.title or ""))
                at = document.text.find(citation.cited_text) if document else -1
                citations.append(
                    Cited(
                        claim_start=start,
                        claim_end=len(text),
                        filename=citation.title or "",
                        start=at if at >= 0 else None,
                        end=at + len(citation.cited_text) if at >= 0 else None,
                        cited_text=citation.cited_text,
                    )
                )
        return Outcome(text, tuple(citations), _declined(text), None, ms)

    return ask


def ask_all(
    cases: list[Case], ask: Asker, *, progress: Callable[[int, int], None] | None = None
) -> list[Outcome]:
    """Every case in turn; a failed request becomes an outcome with its ``error``."""
    outcomes = []
    for done, case in enumerate(cases):
        try:
            outcomes.append(ask(case))
        except Exception as exc:  # noqa: BLE001 - reported per case, the run goes on
            outcomes.append(Outcome("", (), False, None, 0.0, error=f"{type(exc).__name__}: {exc}"))
        if progress:
            progress(done + 1, len(cases))
    return outcomes


def evaluate(
    data: DataSet,
    *,
    surface: Surface,
    url: str | None,
    api_key: str,
    model: str,
    meta: Mapping[str, Any],
    generator: str | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Ingests ``data`` into the server at ``url`` (or one started on a fresh data folder whose
    default agent answers with ``generator``), asks every case through ``surface`` and returns
    the report (``report.build``)."""
    import tempfile
    from contextlib import ExitStack

    from citewell.evaluate.report import build

    buckets_asked = {c.bucket for c in data.cases}
    if surface != "responses" and len(buckets_asked) > 1:
        raise ValueError(
            f"the {surface} surface answers from every bucket of the agent: choose one language "
            f"(--language) so that one bucket is asked, or use --surface responses"
        )
    with ExitStack() as stack:
        if url is None:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="citewell-eval-"))
            url = stack.enter_context(serving(Path(folder), generator=generator))
        started = time.perf_counter()
        step = (lambda done, total: progress("ingest", done, total)) if progress else None
        buckets, data = ingest(data, url, api_key, progress=step)
        ingest_s = time.perf_counter() - started
        ask = make_asker(surface, url, api_key, buckets, data, model)
        step = (lambda done, total: progress("ask", done, total)) if progress else None
        started = time.perf_counter()
        outcomes = ask_all(data.cases, ask, progress=step)
        ask_s = time.perf_counter() - started
    full_meta = {
        **meta,
        "surface": surface,
        "cases": len(data.cases),
        "documents": len(data.documents),
        "ingest_seconds": round(ingest_s, 1),
        "ask_seconds": round(ask_s, 1),
    }
    return build(full_meta, data.cases, outcomes)
