"""The official ``anthropic`` SDK against a real citewell server: ``POST /v1/messages``, files.

Runs three times under ``make test``: with the newest SDK (2.x, the main venv), and with 0.125.0
and 1.17.0 (``.venv-anthropic0``, ``.venv-anthropic1``, ``--noconftest``). So this module
imports nothing from citewell: the server runs in a subprocess (``sdk_server.py``) with the
interpreter that has citewell installed (``CITEWELL_SERVER_PYTHON``, else this one if it has
citewell, else ``.venv/bin/python``), and so does ``pdf_pages.py``, which gives the text of each
page of a PDF as the server reads it (to check ``page_location`` citations).

The SDK majors differ on the wire (reference/wire-formats.md C.1): 0.x and 1.x send
``x-api-key`` and ``anthropic-version: 2023-06-01``, 2.x sends ``Authorization: Bearer`` and
``2026-10-21``. The version-dependent refusals (C.3.4) are checked under both versions in every
major, by setting ``anthropic-version`` explicitly.
"""

from __future__ import annotations

import base64
import functools
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from tests.e2e.sdk_harness import (
    HANDBOOK,
    REPO,
    evaldata,
    http,
    multi_page_pdf,
    running_server,
    server_python,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SDK_MAJOR = int(anthropic.__version__.split(".")[0])
AGENT = "citewell-agent"
OLD, NEW = "2023-06-01", "2026-10-21"
"""The two API versions: 0.x/1.x send the first, 2.x the second."""
FILES_BETA = "files-api-2025-04-14"

MEMBERSHIP = "How much does membership cost?"
MEMBERSHIP_ANSWER = (
    "Membership costs 40 euros a year, or 15 euros for students and people on a low income."
)
UNANSWERED = "What is the boiling point of liquid nitrogen?"
REFUSAL = "The available sources do not answer this question."
REFUSAL_ES = "Las fuentes disponibles no responden a esta pregunta."
REFUSAL_ZH = "现有资料无法回答这个问题。"

LIBRARY = (
    "The Harbour Library opens at nine in the morning. "
    "Its reading room holds twelve thousand maps of the coast. "
    "Visitors may borrow up to five books for three weeks."
)
LIBRARY_ANSWER = "Visitors may borrow up to five books for three weeks."
BOOKS = "How many books may visitors borrow?"
FERRY = (
    "The night ferry leaves the island at eleven. "
    "Tickets for the night ferry cost eight euros and are sold on board."
)
FERRY_ANSWER = "Tickets for the night ferry cost eight euros and are sold on board."
TICKETS = "How much do tickets for the night ferry cost?"
CAPITALS = [
    "Paris is the capital of France.",
    "The Seine flows through Paris.",
    "Canberra is the capital city of Australia.",
]
CANBERRA = "Which city is the capital of Australia?"
LATEX = "Which tools gained popularity among academics, scientists, and engineers?"
LATEX_ANSWER = "LaTeX gained popularity"
LATEX_PAGE = 3
RATE_RESULTS = [
    ["Authentication: every request carries an API key.", "Keys are created in the console."],
    [
        "Pagination: lists return twenty items per page.",
        "Rate limits: the API allows one thousand requests per hour per key.",
    ],
]
RATE = "How many requests per hour does the API allow per key?"
RATE_ANSWER = "Rate limits: the API allows one thousand requests per hour per key."


# -- the server ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_server(tmp_path_factory.mktemp("anthropic-sdk")) as url:
        yield url


@pytest.fixture(scope="module")
def client(server: str) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=server, api_key="any-key", max_retries=0) as client:
        yield client


@functools.cache
def pages_of(pdf: bytes) -> list[str]:
    """The text of each page as the server reads it (``pdf_pages.py`` on its interpreter)."""
    folder = REPO / "tests" / "artifacts"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "anthropic-sdk-pages.pdf"
    path.write_bytes(pdf)
    script = Path(__file__).with_name("pdf_pages.py")
    out = subprocess.run(
        [server_python(), str(script), str(path)], check=True, capture_output=True, text=True
    ).stdout
    pages: list[str] = json.loads(out)
    return pages


def poppler_pages() -> list[str]:
    """An independent extraction (poppler's, shipped with the evaluation data)."""
    path = evaldata() / "documents" / "pdf_text" / "multi_page.pages.jsonl"
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [line["text"] for line in sorted(lines, key=lambda line: line["page"])]


def squeeze(text: str) -> str:
    return " ".join(text.split())


# -- requests --------------------------------------------------------------------------------------
def text_document(data: str, title: str | None = None, cite: bool = True) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": data},
        "citations": {"enabled": cite},
    }
    if title is not None:
        block["title"] = title
    return block


def pdf_document(data: bytes, title: str | None = None, cite: bool = True) -> dict[str, Any]:
    encoded = base64.b64encode(data).decode()
    return {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": encoded},
        "title": title,
        "citations": {"enabled": cite},
    }


def content_document(blocks: list[str], title: str | None = None) -> dict[str, Any]:
    return {
        "type": "document",
        "source": {"type": "content", "content": [{"type": "text", "text": b} for b in blocks]},
        "title": title,
        "citations": {"enabled": True},
    }


def file_document(file_id: str, title: str | None = None) -> dict[str, Any]:
    return {
        "type": "document",
        "source": {"type": "file", "file_id": file_id},
        "title": title,
        "citations": {"enabled": True},
    }


def search_result(source: str, title: str, texts: list[str], cite: bool = True) -> dict[str, Any]:
    return {
        "type": "search_result",
        "source": source,
        "title": title,
        "content": [{"type": "text", "text": t} for t in texts],
        "citations": {"enabled": cite},
    }


def user(*blocks: dict[str, Any], question: str | None = None) -> dict[str, Any]:
    text = [{"type": "text", "text": question}] if question is not None else []
    return {"role": "user", "content": [*blocks, *text]}


def plain(value: Any) -> Any:
    """An SDK object as plain JSON data."""
    return value if isinstance(value, dict) else value.to_dict()


MODES = ("whole", "stream")


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def send(client: anthropic.Anthropic, mode: str = "whole", **request: Any) -> dict[str, Any]:
    """One message, whole (``messages.create``) or through ``messages.stream()``: the streamed
    text and citation events must add up to ``get_final_message()``."""
    request.setdefault("model", AGENT)
    request.setdefault("max_tokens", 1024)
    if mode == "whole":
        message: dict[str, Any] = plain(client.messages.create(**request))
        assert message["stop_reason"] == "end_turn"
        return message
    texts: list[str] = []
    citations: list[dict[str, Any]] = []
    with client.messages.stream(**request) as stream:
        for event in stream:
            if event.type == "text":
                texts.append(event.text)
            elif event.type == "citation":
                citations.append(plain(event.citation))
        final: dict[str, Any] = plain(stream.get_final_message())
    assert "".join(texts) == text_of(final)
    assert citations == citations_of(final)
    assert final["stop_reason"] == "end_turn"
    return final


def text_of(message: dict[str, Any]) -> str:
    return "".join(b["text"] for b in message["content"] if b["type"] == "text")


def citations_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for b in message["content"] if b["type"] == "text" for c in b.get("citations") or []]


def check_message(message: dict[str, Any]) -> None:
    """The fields the SDK requires (wire-formats C.4), and cited blocks that quote their source."""
    assert message["type"] == "message" and message["role"] == "assistant"
    assert message["id"].startswith("msg_")
    assert message["model"] == AGENT
    assert message["content"] and all(b["type"] == "text" for b in message["content"])
    usage = message["usage"]
    assert isinstance(usage["input_tokens"], int) and isinstance(usage["output_tokens"], int)
    for block in message["content"]:
        for citation in block.get("citations") or []:
            # The extractive generator states evidence sentences (line breaks made spaces), each
            # citing itself.
            assert squeeze(block["text"]) in squeeze(citation["cited_text"]), (block, citation)


def check_citations(
    message: dict[str, Any],
    messages: list[dict[str, Any]],
    files: dict[str, bytes] | None = None,
) -> list[dict[str, Any]]:
    """Every citation names a request document (or search result) by its index, counted across
    all messages, and its ``cited_text`` is exactly the slice of that source its location names."""
    documents = [
        b
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "document"
    ]
    results = [
        b
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "search_result"
    ]
    citations = citations_of(message)
    for citation in citations:
        kind = citation["type"]
        if kind == "search_result_location":
            result = results[citation["search_result_index"]]
            assert citation["source"] == result["source"]
            assert citation["title"] == result["title"]
            start, end = citation["start_block_index"], citation["end_block_index"]
            assert 0 <= start < end <= len(result["content"])
            assert citation["cited_text"] == "".join(
                b["text"] for b in result["content"][start:end]
            )
            continue
        document = documents[citation["document_index"]]
        assert citation["document_title"] == document.get("title")
        source = document["source"]
        data: bytes | str | None = None
        if source["type"] == "file":
            assert citation.get("file_id") == source["file_id"]
            data = (files or {})[source["file_id"]]
        elif source["type"] == "text":
            data = source["data"]
        elif source["type"] == "base64":
            data = base64.b64decode(source["data"])
        if kind == "char_location":
            text = data.decode() if isinstance(data, bytes) else data
            assert isinstance(text, str), (kind, source)
            start, end = citation["start_char_index"], citation["end_char_index"]
            assert 0 <= start < end <= len(text)
            assert citation["cited_text"] == text[start:end]
        elif kind == "page_location":
            assert isinstance(data, bytes), (kind, source)
            pages = pages_of(data)
            start, end = citation["start_page_number"], citation["end_page_number"]
            assert 1 <= start < end <= len(pages) + 1
            if end == start + 1:
                assert citation["cited_text"] in pages[start - 1]
            else:
                assert squeeze(citation["cited_text"]) in squeeze(
                    " ".join(pages[start - 1 : end - 1])
                )
        elif kind == "content_block_location":
            assert source["type"] == "content", source
            content = source["content"]
            blocks = [content] if isinstance(content, str) else [b["text"] for b in content]
            start, end = citation["start_block_index"], citation["end_block_index"]
            assert 0 <= start < end <= len(blocks)
            assert citation["cited_text"] == "".join(blocks[start:end])
        else:
            raise AssertionError(f"unexpected citation type {kind}: {citation}")
    return citations


def ask(
    client: anthropic.Anthropic,
    mode: str,
    messages: list[dict[str, Any]],
    files: dict[str, bytes] | None = None,
    **options: Any,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    message = send(client, mode, messages=messages, **options)
    check_message(message)
    return message, check_citations(message, messages, files)


# -- auth and versions -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "headers",
    [
        {"x-api-key": "any-key", "anthropic-version": OLD},
        {"authorization": "Bearer any-other-key", "anthropic-version": NEW},
        {"x-api-key": "k", "anthropic-version": NEW},
        {"authorization": "Bearer k", "anthropic-version": OLD},
    ],
    ids=["x-api-key", "bearer", "x-api-key-new", "bearer-old"],
)
def test_both_auth_styles_with_any_key(server: str, headers: dict[str, str]) -> None:
    body = {
        "model": AGENT,
        "max_tokens": 256,
        "messages": [user(text_document(LIBRARY), question=BOOKS)],
    }
    status, response_headers, data = http(
        "POST",
        f"{server}/v1/messages",
        json.dumps(body).encode(),
        {"content-type": "application/json", **headers},
    )
    assert status == 200, data
    message = json.loads(data)
    assert text_of(message).strip() == LIBRARY_ANSWER


def test_the_sdk_sends_its_own_auth_and_version(client: anthropic.Anthropic) -> None:
    messages: Any = [user(text_document(LIBRARY), question=BOOKS)]
    raw = client.messages.with_raw_response.create(model=AGENT, max_tokens=256, messages=messages)
    sent = raw.http_request.headers
    if SDK_MAJOR >= 2:
        assert sent["authorization"] == "Bearer any-key" and sent["anthropic-version"] == NEW
    else:
        assert sent["x-api-key"] == "any-key" and sent["anthropic-version"] == OLD
    assert raw.status_code == 200
    assert text_of(plain(raw.parse())).strip() == LIBRARY_ANSWER


# -- citation types --------------------------------------------------------------------------------
def test_a_text_document_is_cited_by_char_location(client: anthropic.Anthropic, mode: str) -> None:
    messages = [user(text_document(LIBRARY, title="Harbour Library"), question=BOOKS)]
    message, citations = ask(client, mode, messages)
    assert text_of(message).strip() == LIBRARY_ANSWER
    [citation] = citations
    start = LIBRARY.index(LIBRARY_ANSWER)
    assert citation["type"] == "char_location"
    assert (citation["document_index"], citation["document_title"]) == (0, "Harbour Library")
    assert citation["start_char_index"] == start
    assert citation["end_char_index"] in (start + len(LIBRARY_ANSWER), len(LIBRARY))
    assert citation["cited_text"].strip() == LIBRARY_ANSWER


def test_a_document_without_title_has_a_null_title(client: anthropic.Anthropic) -> None:
    message, [citation] = ask(client, "whole", [user(text_document(LIBRARY), question=BOOKS)])
    assert "document_title" in citation and citation["document_title"] is None


def test_a_pdf_is_cited_by_page_location(client: anthropic.Anthropic, mode: str) -> None:
    pdf = multi_page_pdf().read_bytes()
    messages = [user(pdf_document(pdf, title="Word processors"), question=LATEX)]
    message, citations = ask(client, mode, messages)
    assert LATEX_ANSWER in text_of(message)
    [citation] = citations
    assert citation["type"] == "page_location"
    assert (citation["document_index"], citation["document_title"]) == (0, "Word processors")
    assert (citation["start_page_number"], citation["end_page_number"]) == (
        LATEX_PAGE,
        LATEX_PAGE + 1,
    )
    # poppler, another extractor, puts the same words on the same page
    words = squeeze(citation["cited_text"])[:40]
    assert words in squeeze(poppler_pages()[LATEX_PAGE - 1])


def test_a_content_document_is_cited_by_block(client: anthropic.Anthropic, mode: str) -> None:
    messages = [user(content_document(CAPITALS, title="Capitals"), question=CANBERRA)]
    message, citations = ask(client, mode, messages)
    assert text_of(message).strip() == CAPITALS[2]
    [citation] = citations
    assert citation == {
        "type": "content_block_location",
        "cited_text": CAPITALS[2],
        "document_index": 0,
        "document_title": "Capitals",
        "start_block_index": 2,
        "end_block_index": 3,
        **({"file_id": citation["file_id"]} if "file_id" in citation else {}),
    }
    assert citation.get("file_id") is None


def test_a_content_document_given_as_a_string_is_one_block(client: anthropic.Anthropic) -> None:
    document = {
        "type": "document",
        "source": {"type": "content", "content": FERRY},
        "citations": {"enabled": True},
    }
    _, [citation] = ask(client, "whole", [user(document, question=TICKETS)])
    assert citation["type"] == "content_block_location"
    assert (citation["start_block_index"], citation["end_block_index"]) == (0, 1)
    assert citation["cited_text"] == FERRY


def test_search_results_are_cited_by_search_result_location(
    client: anthropic.Anthropic, mode: str
) -> None:
    results = [
        search_result("https://docs.example/auth", "Authentication", RATE_RESULTS[0]),
        search_result("kb://api-guide/limits", "API limits", RATE_RESULTS[1]),
    ]
    message, citations = ask(client, mode, [user(*results, question=RATE)])
    assert text_of(message).strip() == RATE_ANSWER
    [citation] = citations
    assert citation == {
        "type": "search_result_location",
        "cited_text": RATE_ANSWER,
        "search_result_index": 1,
        "source": "kb://api-guide/limits",
        "title": "API limits",
        "start_block_index": 1,
        "end_block_index": 2,
    }


def test_search_results_are_counted_apart_from_documents(
    client: anthropic.Anthropic, mode: str
) -> None:
    messages = [
        user(
            text_document(LIBRARY),
            search_result("https://docs.example/auth", "Authentication", RATE_RESULTS[0]),
            text_document(FERRY),
            search_result("kb://api-guide/limits", "API limits", RATE_RESULTS[1]),
            question=RATE,
        )
    ]
    _, [citation] = ask(client, mode, messages)
    assert citation["type"] == "search_result_location"
    assert citation["search_result_index"] == 1
    messages[0]["content"][-1]["text"] = TICKETS
    _, [citation] = ask(client, mode, messages)
    assert (citation["type"], citation["document_index"]) == ("char_location", 1)


def test_a_plain_question_is_answered_from_the_buckets(
    client: anthropic.Anthropic, server: str, mode: str
) -> None:
    message = send(client, mode, messages=[{"role": "user", "content": MEMBERSHIP}])
    check_message(message)
    assert text_of(message).strip() == MEMBERSHIP_ANSWER
    [citation] = citations_of(message)
    assert citation["type"] == "search_result_location"
    assert citation["search_result_index"] == 0
    assert 0 <= citation["start_block_index"] < citation["end_block_index"]
    assert citation["cited_text"].strip() == MEMBERSHIP_ANSWER
    assert "bike-coop-handbook.md" in (citation["title"] or "")
    # The source is a signed link that opens the cited file's original, without a key.
    assert citation["source"].startswith(f"{server}/v1/links/")
    status, _, data = http("GET", citation["source"])
    assert (status, data) == (200, HANDBOOK.read_bytes())


def test_a_question_the_sources_do_not_answer_is_declined(
    client: anthropic.Anthropic, mode: str
) -> None:
    for messages in (
        [{"role": "user", "content": UNANSWERED}],
        [user(text_document(LIBRARY), question=UNANSWERED)],
    ):
        message = send(client, mode, messages=messages)
        check_message(message)
        assert text_of(message) == REFUSAL
        assert citations_of(message) == []


@pytest.mark.parametrize(
    ("document", "question", "refusal"),
    [
        (
            "La biblioteca abre a las nueve de la mañana.",
            "¿Cuál es la capital de Perú?",
            REFUSAL_ES,
        ),
        ("图书馆早上九点开门。", "秘鲁的首都是哪座城市？", REFUSAL_ZH),
    ],
    ids=["es", "zh"],
)
def test_the_refusal_speaks_the_question_s_language(
    client: anthropic.Anthropic, document: str, question: str, refusal: str
) -> None:
    message = send(client, messages=[user(text_document(document), question=question)])
    assert text_of(message) == refusal and citations_of(message) == []


# -- several documents, several messages -----------------------------------------------------------
def test_document_index_counts_documents_across_messages(
    client: anthropic.Anthropic, mode: str
) -> None:
    pdf = multi_page_pdf().read_bytes()
    messages = [
        user(text_document(LIBRARY, title="library"), question="Please keep this document."),
        {"role": "assistant", "content": "I will keep it."},
        user(
            content_document(CAPITALS, title="capitals"),
            pdf_document(pdf, title="pdf"),
            question="And these two.",
        ),
        {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
        user(text_document(FERRY, title="ferry"), question=TICKETS),
    ]
    message, [citation] = ask(client, mode, messages)
    assert text_of(message).strip() == FERRY_ANSWER
    assert (citation["type"], citation["document_index"]) == ("char_location", 3)
    assert citation["document_title"] == "ferry"
    for question, index, kind in (
        (BOOKS, 0, "char_location"),
        (CANBERRA, 1, "content_block_location"),
        (LATEX, 2, "page_location"),
    ):
        messages[-1]["content"][-1]["text"] = question
        _, [citation] = ask(client, mode, messages)
        assert (citation["type"], citation["document_index"]) == (kind, index)


def test_a_replayed_answer_with_its_citations_is_accepted(client: anthropic.Anthropic) -> None:
    """Clients send earlier answers back as they got them, citations (and extra keys) included."""
    first = [user(text_document(LIBRARY), question=BOOKS)]
    answer = send(client, messages=first)
    assert citations_of(answer)
    for version in (OLD, NEW):
        messages = [
            *first,
            {"role": "assistant", "content": answer["content"]},
            {"role": "user", "content": "How long may they keep them?"},
        ]
        follow_up = send(client, messages=messages, extra_headers={"anthropic-version": version})
        check_message(follow_up)


# -- files -----------------------------------------------------------------------------------------
def upload_file(
    client: anthropic.Anthropic, way: str, name: str, data: bytes, media_type: str
) -> dict[str, Any]:
    if way == "beta":
        # 0.x adds the files beta header itself; 1.x and 2.x send only what `betas` names.
        beta = client.beta.files.upload(file=(name, data, media_type), betas=[FILES_BETA])
        uploaded: dict[str, Any] = plain(beta)
    else:
        uploaded = plain(client.files.upload(file=(name, data, media_type)))
    return uploaded


FILE_WAYS = ["beta"] + (["files"] if hasattr(anthropic.Anthropic, "files") else [])


@pytest.mark.parametrize("way", FILE_WAYS)
def test_uploaded_files_are_cited_as_documents(
    client: anthropic.Anthropic, mode: str, way: str
) -> None:
    pdf = multi_page_pdf().read_bytes()
    text = LIBRARY.encode()
    text_file = upload_file(client, way, "library.txt", text, "text/plain")
    pdf_file = upload_file(client, way, "multi_page.pdf", pdf, "application/pdf")
    for uploaded, name, data in (
        (text_file, "library.txt", text),
        (pdf_file, "multi_page.pdf", pdf),
    ):
        assert uploaded["type"] == "file" and uploaded["id"].startswith("file_")
        assert (uploaded["filename"], uploaded["size_bytes"]) == (name, len(data))
    files = {text_file["id"]: text, pdf_file["id"]: pdf}
    messages = [
        user(
            file_document(text_file["id"], title="library"),
            file_document(pdf_file["id"]),
            question=BOOKS,
        )
    ]
    message, [citation] = ask(client, mode, messages, files)
    assert text_of(message).strip() == LIBRARY_ANSWER
    assert (citation["type"], citation["document_index"]) == ("char_location", 0)
    assert citation["file_id"] == text_file["id"]
    messages[0]["content"][-1]["text"] = LATEX
    _, [citation] = ask(client, mode, messages, files)
    assert (citation["type"], citation["document_index"]) == ("page_location", 1)
    assert citation["file_id"] == pdf_file["id"]
    assert citation["start_page_number"] == LATEX_PAGE


def test_an_unknown_file_is_refused(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.APIStatusError) as caught:
        send(client, messages=[user(file_document("file_unknown"), question=BOOKS)])
    assert caught.value.status_code in (400, 404)


# -- streaming -------------------------------------------------------------------------------------
def test_a_stream_sends_the_events_in_order(client: anthropic.Anthropic) -> None:
    messages: Any = [user(text_document(LIBRARY), question=BOOKS)]
    whole = send(client, messages=messages)
    stream = client.messages.create(model=AGENT, max_tokens=256, messages=messages, stream=True)
    events = [plain(event) for event in stream]
    types = [e["type"] for e in events]
    assert types[0] == "message_start" and types[-1] == "message_stop"
    assert types[-2] == "message_delta"
    start = events[0]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert isinstance(start["usage"]["input_tokens"], int)
    assert events[-2]["delta"]["stop_reason"] == "end_turn"
    assert isinstance(events[-2]["usage"]["output_tokens"], int)
    opened = [e["index"] for e in events if e["type"] == "content_block_start"]
    closed = [e["index"] for e in events if e["type"] == "content_block_stop"]
    assert opened == closed == list(range(len(whole["content"])))
    blocks: list[dict[str, Any]] = []
    for event in events:
        if event["type"] == "content_block_start":
            blocks.append({"type": "text", "text": event["content_block"]["text"]})
        elif event["type"] == "content_block_delta":
            block, delta = blocks[event["index"]], event["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            else:
                assert delta["type"] == "citations_delta"
                block.setdefault("citations", []).append(delta["citation"])
    assert [b["text"] for b in blocks] == [b["text"] for b in whole["content"]]
    assert [b.get("citations") or [] for b in blocks] == [
        b.get("citations") or [] for b in whole["content"]
    ]


@pytest.mark.parametrize(
    "messages",
    [
        [user(text_document(LIBRARY), question=BOOKS)],
        [user(content_document(CAPITALS), question=CANBERRA)],
        [{"role": "user", "content": MEMBERSHIP}],
        [{"role": "user", "content": UNANSWERED}],
    ],
    ids=["text", "content", "buckets", "declined"],
)
def test_a_stream_adds_up_to_the_whole_message(
    client: anthropic.Anthropic, messages: list[dict[str, Any]]
) -> None:
    whole = send(client, "whole", messages=messages)
    streamed = send(client, "stream", messages=messages)
    # Each reply makes its own signed links (expiring from when it was made); the rest is equal.
    for citation in citations_of(whole) + citations_of(streamed):
        if citation["type"] == "search_result_location":
            del citation["source"]
    assert streamed["content"] == whole["content"]
    assert (streamed["model"], streamed["stop_reason"]) == (whole["model"], whole["stop_reason"])


# -- validation ------------------------------------------------------------------------------------
def refused(client: anthropic.Anthropic, version: str | None = None, **request: Any) -> str:
    """The request is refused with 400 ``invalid_request_error`` in Anthropic's error shape,
    whole and streamed; returns the message."""
    if version is not None:
        request["extra_headers"] = {"anthropic-version": version}
    request.setdefault("model", AGENT)
    request.setdefault("max_tokens", 256)
    for stream in (False, True):
        with pytest.raises(anthropic.BadRequestError) as caught:
            if stream:
                with client.messages.stream(**request) as events:
                    list(events)
            else:
                client.messages.create(**request)
        error = caught.value
        assert error.status_code == 400
        body: Any = error.body
        assert isinstance(body, dict) and body["type"] == "error", body
        assert body["error"]["type"] == "invalid_request_error"
        assert isinstance(body["error"]["message"], str) and body["error"]["message"]
        assert isinstance(body.get("request_id"), str)
        assert error.response.headers.get("request-id") == body["request_id"]
    message: str = body["error"]["message"]
    return message


OVERSIZED_PAGES = 5001
"""More pages than citewell reads from one document (``ingest.max_pages``, 5000)."""


def blank_pdf(pages: int) -> bytes:
    """A valid PDF of empty pages, written by hand (no PDF library in the SDK venvs)."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + b" ".join(f"{3 + i} 0 R".encode() for i in range(pages))
        + f"] /Count {pages} >>".encode(),
    ]
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >>"] * pages
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return bytes(out)


SCHEMA = {
    "type": "json_schema",
    "schema": {"type": "object", "properties": {"answer": {"type": "string"}}},
}
USER_CITATION = {
    "type": "char_location",
    "cited_text": "The Harbour Library opens at nine in the morning. ",
    "document_index": 0,
    "document_title": None,
    "start_char_index": 0,
    "end_char_index": 50,
}


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param(
            {
                "messages": [
                    user(text_document(LIBRARY), text_document(FERRY, cite=False), question=BOOKS)
                ]
            },
            id="citations-mixed-across-documents",
        ),
        pytest.param(
            {
                "messages": [
                    user(text_document(LIBRARY)),
                    {"role": "assistant", "content": "ok"},
                    user(text_document(FERRY, cite=False), question=BOOKS),
                ]
            },
            id="citations-mixed-across-messages",
        ),
        pytest.param(
            {
                "messages": [
                    user(
                        search_result("kb://a", "A", RATE_RESULTS[0]),
                        search_result("kb://b", "B", RATE_RESULTS[1], cite=False),
                        question=RATE,
                    )
                ]
            },
            id="citations-mixed-across-search-results",
        ),
        pytest.param(
            {
                "messages": [user(text_document(LIBRARY), question=BOOKS)],
                "extra_body": {"output_config": {"format": SCHEMA}},
            },
            id="citations-with-output-format",
        ),
        pytest.param(
            {
                "messages": [user(search_result("kb://b", "B", RATE_RESULTS[1]), question=RATE)],
                "extra_body": {"output_config": {"format": SCHEMA}},
            },
            id="search-result-citations-with-output-format",
        ),
        pytest.param(
            {"messages": [user(pdf_document(b"%PDF-1.4 this is no PDF at all"), question=BOOKS)]},
            id="malformed-pdf",
        ),
        pytest.param(
            {
                "messages": [
                    user(
                        {
                            "type": "document",
                            "source": {
                                "type": "base64",
                                "media_type": "application/pdf",
                                "data": "not base64 !!!",
                            },
                            "citations": {"enabled": True},
                        },
                        question=BOOKS,
                    )
                ]
            },
            id="pdf-not-base64",
        ),
        pytest.param(
            {"messages": [user(pdf_document(blank_pdf(OVERSIZED_PAGES)), question=BOOKS)]},
            id="oversized-pdf",
        ),
        pytest.param(
            {"messages": [user({"type": "frobnicate", "text": "x"}, question=BOOKS)]},
            id="unknown-block-type",
        ),
        pytest.param(
            {
                "messages": [
                    user(
                        {
                            "type": "document",
                            "source": {"type": "telepathy", "data": "x"},
                            "citations": {"enabled": True},
                        },
                        question=BOOKS,
                    )
                ]
            },
            id="unknown-source-type",
        ),
    ],
)
@pytest.mark.parametrize("version", [OLD, NEW])
def test_invalid_requests_are_refused_in_anthropic_shape(
    client: anthropic.Anthropic, request_: dict[str, Any], version: str
) -> None:
    refused(client, version, **request_)


ASSISTANT_DOCUMENT = [
    user(question="Here is a document."),
    {"role": "assistant", "content": [text_document(LIBRARY)]},
    user(question=BOOKS),
]
CITING_USER = [
    {
        "role": "user",
        "content": [
            text_document(LIBRARY),
            {"type": "text", "text": BOOKS, "citations": [USER_CITATION]},
        ],
    }
]
CITING_SEARCH_RESULT = [
    {
        "role": "user",
        "content": [
            {
                "type": "search_result",
                "source": "kb://api-guide/limits",
                "title": "API limits",
                "content": [
                    {"type": "text", "text": RATE_RESULTS[1][1], "citations": [USER_CITATION]}
                ],
                "citations": {"enabled": True},
            },
            {"type": "text", "text": RATE},
        ],
    }
]
PLAIN = [user(text_document(LIBRARY), question=BOOKS)]


@pytest.mark.parametrize(
    ("messages", "extra"),
    [
        pytest.param(ASSISTANT_DOCUMENT, {}, id="document-in-assistant-turn"),
        pytest.param(CITING_USER, {}, id="citations-on-user-text"),
        pytest.param(CITING_SEARCH_RESULT, {}, id="citations-inside-search-result"),
        pytest.param(PLAIN, {"temperature": 0.0}, id="temperature"),
        pytest.param(PLAIN, {"top_p": 0.9}, id="top_p"),
        pytest.param(PLAIN, {"top_k": 5}, id="top_k"),
        pytest.param(PLAIN, {"temperature": 1.0, "top_p": 1.0}, id="defaults"),
    ],
)
def test_version_2026_10_21_refuses_what_2023_06_01_accepts(
    client: anthropic.Anthropic, messages: list[dict[str, Any]], extra: dict[str, Any]
) -> None:
    refused(client, NEW, messages=messages, extra_body=extra)
    accepted = send(
        client, messages=messages, extra_body=extra, extra_headers={"anthropic-version": OLD}
    )
    check_message(accepted)


def test_the_default_version_of_each_sdk_decides(client: anthropic.Anthropic) -> None:
    """2.x sends 2026-10-21, so it gets the new refusals; 0.x and 1.x do not."""
    request: dict[str, Any] = {
        "model": AGENT,
        "max_tokens": 256,
        "messages": PLAIN,
        "extra_body": {"top_k": 5},
    }
    if SDK_MAJOR >= 2:
        with pytest.raises(anthropic.BadRequestError):
            client.messages.create(**request)
    else:
        check_message(plain(client.messages.create(**request)))


def test_the_server_keeps_serving_after_refusals(client: anthropic.Anthropic) -> None:
    message = send(client, messages=PLAIN)
    assert text_of(message).strip() == LIBRARY_ANSWER
