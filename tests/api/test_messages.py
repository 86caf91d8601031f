"""POST /v1/messages: Anthropic's Messages API with document citations, over the official SDK."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from fastapi.testclient import TestClient

from citewell.api import create_app
from citewell.config import IngestSettings, Settings
from tests.api.answering import (
    FIRST,
    POLICY,
    UNSUPPORTED,
    WARRANTY,
    answering,
    scripted,
    sse,
)
from tests.api.conftest import Response

__all__ = ["answering", "scripted"]  # fixtures

NEW = {"anthropic-version": "2026-10-21"}
OLD = {"anthropic-version": "2023-06-01"}
GRASS = "The grass is green. The sky is blue.\n\nWater is wet and rivers flow to the sea."


def text_doc(data: str, *, cite: bool = True, title: str | None = "Example") -> dict[str, Any]:
    return {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": data},
        "title": title,
        "citations": {"enabled": cite},
    }


def ask(client: TestClient, *blocks: Any, question: str, headers: Any = NEW, **body: Any) -> Any:
    content = [*blocks, {"type": "text", "text": question}]
    payload = {
        "model": "citewell-agent",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": content}],
        **body,
    }
    return client.post("/v1/messages", json=payload, headers=headers)


def ask_agent(client: TestClient, model: str, question: str, *, max_tokens: int) -> Any:
    """A question alone (no documents) to an agent: it answers from its buckets."""
    payload = {
        "model": model,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": question}],
    }
    return client.post("/v1/messages", json=payload, headers=NEW)


def message(response: Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    assert response.headers["request-id"].startswith("req_")
    body: dict[str, Any] = response.json()
    return body


def cited(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for block in body["content"] for c in block.get("citations") or ()]


def assert_anthropic_error(response: Response, status: int, kind: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"type", "error", "request_id"}
    assert body["type"] == "error"
    assert set(body["error"]) == {"type", "message"}
    assert body["error"]["type"] == kind
    assert response.headers["request-id"] == body["request_id"]
    message: str = body["error"]["message"]
    return message


@pytest.fixture
def pdf(documents: Path) -> str:
    return base64.b64encode((documents / "pdf_text" / "multi_page.pdf").read_bytes()).decode()


@pytest.fixture
def pages(documents: Path) -> dict[int, str]:
    lines = (documents / "pdf_text" / "multi_page.pages.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    return {r["page"]: r["text"] for r in records}


def test_a_text_document_is_cited_by_characters_of_its_data(client: TestClient) -> None:
    body = message(ask(client, text_doc(GRASS), question="What color is the sky?"))
    assert body["type"] == "message" and body["role"] == "assistant"
    assert body["id"].startswith("msg_") and body["model"] == "citewell-agent"
    assert (body["stop_reason"], body["stop_sequence"]) == ("end_turn", None)
    assert body["usage"]["input_tokens"] > 0 and body["usage"]["output_tokens"] > 0
    (citation,) = cited(body)
    assert citation == {
        "type": "char_location",
        "cited_text": "The sky is blue.",
        "document_index": 0,
        "document_title": "Example",
        "start_char_index": 20,
        "end_char_index": 36,
    }
    assert GRASS[20:36] == citation["cited_text"]


def test_blocks_concatenate_to_the_answer_and_cited_claims_stand_alone(
    answering: TestClient,
) -> None:
    doc = "Refunds are paid within thirty days. Every bicycle carries a two-year warranty."
    body = message(
        answering.post(
            "/v1/messages",
            json={
                "model": "scripted",
                "max_tokens": 100,
                "messages": [
                    {"role": "user", "content": [text_doc(doc), {"type": "text", "text": "?"}]}
                ],
            },
        )
    )
    texts = [b["text"] for b in body["content"]]
    assert texts == [
        "Refunds are paid within thirty days.",
        " ",
        "Every bicycle carries a two-year warranty.",
    ]
    assert [("citations" in b) for b in body["content"]] == [True, False, True]
    for citation in cited(body):
        start, end = citation["start_char_index"], citation["end_char_index"]
        assert doc[start:end] == citation["cited_text"]


def test_a_pdf_is_cited_by_page(client: TestClient, pdf: str, pages: dict[int, str]) -> None:
    source = {"type": "base64", "media_type": "application/pdf", "data": pdf}
    document = {"type": "document", "source": source, "citations": {"enabled": True}}
    body = message(ask(client, document, question="What did LaTeX gain among academics?"))
    citations = cited(body)
    assert citations
    first = citations[0]
    assert first["type"] == "page_location"
    assert "LaTeX gained popularity" in first["cited_text"]
    assert (first["start_page_number"], first["end_page_number"]) == (3, 4)
    assert first["document_title"] is None and "file_id" not in first
    for citation in citations:
        on_pages = " ".join(
            pages[n] for n in range(citation["start_page_number"], citation["end_page_number"])
        )
        assert " ".join(citation["cited_text"].split()) in " ".join(on_pages.split())


def test_a_scanned_pdf_is_read_by_ocr_and_cited_by_page(
    client: TestClient, documents: Path
) -> None:
    # Anthropic's own API cannot cite a PDF without a text layer; citewell reads it first.
    scan = (documents / "pdf_scanned" / "docling_ocr_test.pdf").read_bytes()
    source = {
        "type": "base64",
        "media_type": "application/pdf",
        "data": base64.b64encode(scan).decode(),
    }
    document = {"type": "document", "source": source, "citations": {"enabled": True}}
    body = message(ask(client, document, question="What does Docling bundle?"))
    [citation] = cited(body)
    assert citation["type"] == "page_location"
    assert (citation["start_page_number"], citation["end_page_number"]) == (1, 2)
    assert " ".join(citation["cited_text"].split()).startswith(
        "Docling bundles PDF document conversion to JSON and Markdown"
    )


def test_custom_content_is_cited_by_block_and_never_split(client: TestClient) -> None:
    blocks = ["Dragons sleep by day. They hunt at night.", "The storeroom is guarded by dragons."]
    document = {
        "type": "document",
        "source": {"type": "content", "content": [{"type": "text", "text": t} for t in blocks]},
        "title": "Lore",
        "citations": {"enabled": True},
    }
    body = message(ask(client, document, question="Who guards the storeroom?"))
    (citation,) = cited(body)
    assert citation["type"] == "content_block_location"
    start, end = citation["start_block_index"], citation["end_block_index"]
    assert (start, end) == (1, 2)
    assert citation["cited_text"] == "".join(blocks[start:end])


def test_document_and_search_result_indices_count_over_all_messages(
    client: TestClient,
) -> None:
    other = text_doc("Cats purr when content.", title="Cats")
    result = {
        "type": "search_result",
        "source": "kb://owls",
        "title": "Owls",
        "content": [
            {"type": "text", "text": "Owls hunt at night."},
            {"type": "text", "text": "Owls eat mice."},
        ],
        "citations": {"enabled": True},
    }
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [other, {"type": "text", "text": "Tell me about cats."}]},
        {"role": "assistant", "content": "Cats purr."},
        {
            "role": "user",
            "content": [result, text_doc(GRASS), {"type": "text", "text": "What do owls eat?"}],
        },
    ]
    body = message(
        client.post(
            "/v1/messages",
            json={"model": "citewell-agent", "max_tokens": 64, "messages": messages},
            headers=NEW,
        )
    )
    (citation,) = cited(body)
    assert citation == {
        "type": "search_result_location",
        "cited_text": "Owls eat mice.",
        "search_result_index": 0,
        "source": "kb://owls",
        "title": "Owls",
        "start_block_index": 1,
        "end_block_index": 2,
    }
    body = message(
        client.post(
            "/v1/messages",
            json={
                "model": "citewell-agent",
                "max_tokens": 64,
                "messages": [
                    *messages[:2],
                    {
                        **messages[2],
                        "content": [
                            result,
                            text_doc(GRASS),
                            {"type": "text", "text": "What color is the sky?"},
                        ],
                    },
                ],
            },
        )
    )
    (citation,) = cited(body)
    assert (citation["type"], citation["document_index"]) == ("char_location", 1)


def test_documents_without_citations_are_read_but_never_cited(client: TestClient) -> None:
    body = message(ask(client, text_doc(GRASS, cite=False), question="What color is the sky?"))
    assert "The sky is blue." in "".join(b["text"] for b in body["content"])
    assert cited(body) == []


def test_a_question_without_documents_cites_retrieved_sources_as_search_results(
    answering: TestClient,
) -> None:
    body = message(ask_agent(answering, "scripted", "refunds and warranty?", max_tokens=100))
    citations = cited(body)
    assert len(citations) == 2
    for citation in citations:
        assert citation["type"] == "search_result_location"
        # A signed link that opens the cited source's original.
        assert citation["source"].startswith("http://testserver/v1/links/")
        original = answering.get(citation["source"]).text
        assert original == {"policy.md": POLICY, "warranty.txt": WARRANTY}[citation["title"]]
        assert citation["cited_text"] in original
        assert citation["end_block_index"] > citation["start_block_index"] >= 0
    assert {c["title"] for c in citations} == {"policy.md", "warranty.txt"}


def test_hidden_sources_give_plain_text(answering: TestClient) -> None:
    body = message(ask_agent(answering, "hidden", "refunds?", max_tokens=9))
    assert [set(b) for b in body["content"]] == [{"type", "text"}]


def test_an_unsupported_claim_is_a_flagged_block_without_citations(
    answering: TestClient,
) -> None:
    body = message(ask_agent(answering, "wandering", "How long do refunds take?", max_tokens=50))
    assert [set(b) for b in body["content"]] == [
        {"type", "text", "citations"},
        {"type", "text"},
        {"type", "text", "unsupported"},
    ]
    assert [b["text"] for b in body["content"]] == [FIRST, " ", UNSUPPORTED]
    assert body["content"][2]["unsupported"] is True
    assert [c["cited_text"] for c in cited(body)] == [
        "Refunds are paid within thirty days of the request."
    ]


def test_the_refusal_is_a_plain_block(answering: TestClient) -> None:
    body = message(ask_agent(answering, "declining", "refunds?", max_tokens=9))
    assert body["content"] == [
        {"type": "text", "text": "The available sources do not answer this question."}
    ]


def test_an_unknown_model_is_not_found(client: TestClient) -> None:
    response = client.post(
        "/v1/messages",
        json={"model": "nope", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert "nope" in assert_anthropic_error(response, 404, "not_found_error")


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [{"role": "user", "content": "hi"}]},  # no max_tokens
        {"max_tokens": 5},  # no messages
        {"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "video"}]}]},
        {"max_tokens": "many", "messages": [{"role": "user", "content": "hi"}]},
        {
            "max_tokens": 5,
            "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}],
        },
        {"max_tokens": 5, "messages": [{"role": "assistant", "content": "prefill"}]},
    ],
)
def test_malformed_requests_are_invalid_in_anthropics_shape(
    client: TestClient, body: dict[str, Any]
) -> None:
    response = client.post("/v1/messages", json={"model": "citewell-agent", **body})
    assert_anthropic_error(response, 400, "invalid_request_error")


@pytest.mark.parametrize(
    ("block", "param", "words"),
    [
        ({"type": "video"}, "messages[0].content[0]", "Input tag 'video'"),
        (
            {"type": "document", "source": {"type": "blob", "data": "x"}},
            "messages[0].content[0].document.source",
            "Input tag 'blob'",
        ),
    ],
)
def test_an_unknown_block_type_is_named_in_the_error(
    client: TestClient, block: dict[str, Any], param: str, words: str
) -> None:
    response = client.post(
        "/v1/messages",
        json={
            "model": "citewell-agent",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": [block]}],
        },
    )
    message = assert_anthropic_error(response, 400, "invalid_request_error")
    assert message.startswith(f"Invalid '{param}': {words} found using 'type'")


def test_invalid_json_is_invalid_in_anthropics_shape(client: TestClient) -> None:
    response = client.post(
        "/v1/messages", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert_anthropic_error(response, 400, "invalid_request_error")


def test_mixed_citation_settings_are_refused(client: TestClient) -> None:
    response = ask(client, text_doc(GRASS), text_doc(GRASS, cite=False), question="sky?")
    assert "all or none" in assert_anthropic_error(response, 400, "invalid_request_error")
    result = {
        "type": "search_result",
        "source": "s",
        "title": "t",
        "content": [{"type": "text", "text": "x"}],
    }
    response = ask(client, result, {**result, "citations": {"enabled": True}}, question="x?")
    assert "search results" in assert_anthropic_error(response, 400, "invalid_request_error")


@pytest.mark.parametrize(
    "field",
    [
        {"output_config": {"format": {"type": "json_schema", "schema": {}}}},
        {"output_format": {"type": "json_schema"}},
    ],
)
def test_citations_with_structured_outputs_are_refused(
    client: TestClient, field: dict[str, Any]
) -> None:
    response = ask(client, text_doc(GRASS), question="sky?", **field)
    assert_anthropic_error(response, 400, "invalid_request_error")
    message(ask(client, text_doc(GRASS, cite=False), question="sky?", **field))


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ("not base64!!", "base64"),
        (base64.b64encode(b"hello, not a pdf").decode(), "not a PDF"),
        (base64.b64encode(b"%PDF-1.4 truncated nonsense").decode(), "PDF"),
    ],
)
def test_bad_pdfs_are_refused(client: TestClient, data: str, words: str) -> None:
    source = {"type": "base64", "media_type": "application/pdf", "data": data}
    response = ask(client, {"type": "document", "source": source}, question="x?")
    assert words in assert_anthropic_error(response, 400, "invalid_request_error")


def test_a_pdf_over_the_size_limit_is_refused(settings: Settings, pdf: str) -> None:
    small = settings.model_copy(update={"ingest": IngestSettings(max_file_bytes=1000)})
    source = {"type": "base64", "media_type": "application/pdf", "data": pdf}
    with TestClient(create_app(small)) as client:
        response = ask(client, {"type": "document", "source": source}, question="x?")
    assert "limit" in assert_anthropic_error(response, 400, "invalid_request_error")


def test_documents_over_the_request_limit_are_too_large_in_anthropics_shape(
    settings: Settings,
) -> None:
    limits = settings.ingest.model_copy(update={"max_request_document_bytes": 1000})
    with TestClient(create_app(settings.model_copy(update={"ingest": limits}))) as client:
        fits = ask(client, text_doc("é" * 250), text_doc("a" * 499), question="x?")
        assert fits.status_code == 200, fits.text  # 500 + 499 bytes: within the limit
        over = ask(client, text_doc("é" * 250), text_doc("a" * 501), question="x?")
        error = assert_anthropic_error(over, 413, "request_too_large")
        assert "CITEWELL_INGEST__MAX_REQUEST_DOCUMENT_BYTES" in error
        sdk = anthropic.Anthropic(api_key="x", base_url=str(client.base_url), http_client=client)
        with pytest.raises(anthropic.APIStatusError) as refused:
            sdk.messages.create(
                model="citewell-agent",
                max_tokens=50,
                messages=[
                    {
                        "role": "user",
                        "content": [text_doc("b" * 2000), {"type": "text", "text": "x?"}],
                    }
                ],  # type: ignore[list-item]
            )
        assert refused.value.status_code == 413
        assert client.get("/healthz").status_code == 200


def test_a_huge_body_is_too_large_in_anthropics_shape(client: TestClient) -> None:
    response = client.post(
        "/v1/messages",
        content=b"x" * (33 * 1024 * 1024),
        headers={"content-type": "application/json"},
    )
    assert_anthropic_error(response, 413, "request_too_large")


@pytest.mark.parametrize(
    "change",
    [
        {"temperature": 0.5},
        {"top_p": 1.0},
        {"top_k": 5},
        {"assistant_document": True},
        {"user_citations": True},
    ],
)
def test_version_2026_10_21_refuses_what_2023_06_01_accepts(
    client: TestClient, change: dict[str, Any]
) -> None:
    question: dict[str, Any] = {"type": "text", "text": "What color is the sky?"}
    messages: list[dict[str, Any]] = [{"role": "user", "content": [text_doc(GRASS), question]}]
    body: dict[str, Any] = {
        k: v for k, v in change.items() if k in ("temperature", "top_p", "top_k")
    }
    if "assistant_document" in change:
        messages = [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": [text_doc(GRASS)]},
            {"role": "user", "content": [text_doc(GRASS), question]},
        ]
    if "user_citations" in change:
        replayed = {
            "type": "char_location",
            "cited_text": "x",
            "document_index": 0,
            "document_title": None,
            "start_char_index": 0,
            "end_char_index": 1,
        }
        messages[0]["content"][1] = {**question, "citations": [replayed]}
    payload = {"model": "citewell-agent", "max_tokens": 50, "messages": messages, **body}
    response = client.post("/v1/messages", json=payload, headers=NEW)
    assert_anthropic_error(response, 400, "invalid_request_error")
    message(client.post("/v1/messages", json=payload, headers=OLD))
    message(client.post("/v1/messages", json=payload))  # no version: 2023-06-01


def test_both_auth_header_styles_are_accepted(client: TestClient) -> None:
    for headers in (
        {"x-api-key": "k"},
        {"authorization": "Bearer k"},
        {"authorization": "nonsense"},
    ):
        message(ask(client, text_doc(GRASS), question="sky?", headers={**NEW, **headers}))


def test_system_prompts_and_mid_conversation_system_messages_are_accepted(
    client: TestClient,
) -> None:
    payload = {
        "model": "citewell-agent",
        "max_tokens": 50,
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [
            {"role": "user", "content": "Hello"},
            {"role": "user", "content": [text_doc(GRASS)]},
            {"role": "system", "content": "Answer in English."},
            {"role": "user", "content": "What color is the sky?"},
        ],
    }
    assert cited(message(client.post("/v1/messages", json=payload, headers=NEW)))


def test_the_stream_follows_anthropics_event_order(client: TestClient) -> None:
    response = ask(client, text_doc(GRASS), question="What color is the sky?", stream=True)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse(response.text)
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["message_start", "ping"]
    assert kinds[-2:] == ["message_delta", "message_stop"]
    assert events[0]["message"]["content"] == [] and events[0]["message"]["stop_reason"] is None
    starts = [e["index"] for e in events if e["type"] == "content_block_start"]
    assert starts == list(range(len(starts)))
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    assert {
        "type": "citations_delta",
        "citation": cited(message(ask(client, text_doc(GRASS), question="What color is the sky?")))[
            0
        ],
    } in deltas


def test_a_generator_failure_mid_stream_is_an_error_event(answering: TestClient) -> None:
    response = answering.post(
        "/v1/messages",
        json={
            "model": "broken",
            "max_tokens": 9,
            "stream": True,
            "messages": [{"role": "user", "content": "refunds?"}],
        },
    )
    events = sse(response.text)
    assert events[0]["type"] == "message_start"
    assert events[-1]["type"] == "error"
    assert events[-1]["error"] == {
        "type": "overloaded_error",
        "message": "The model server refused.",
    }


def sdk(client: TestClient) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="any", base_url=str(client.base_url), http_client=client)


def sdk_messages(blocks: list[dict[str, Any]], question: str) -> Any:
    return [{"role": "user", "content": [*blocks, {"type": "text", "text": question}]}]


@pytest.mark.parametrize(
    ("model", "doc", "question"),
    [
        (
            "scripted",
            "Refunds are paid within thirty days. Every bicycle carries a two-year warranty.",
            "How long do refunds take, and the warranty?",
        ),
        (
            "wandering",
            "Refunds are paid within thirty days. Every bicycle carries a two-year warranty.",
            "How long do refunds take?",
        ),
        ("citewell-agent", GRASS, "What color is the sky?"),
    ],
)
def test_the_sdk_stream_helper_accumulates_the_same_message(
    answering: TestClient, model: str, doc: str, question: str
) -> None:
    client = sdk(answering)
    messages = sdk_messages([text_doc(doc)], question)
    whole = client.messages.create(model=model, max_tokens=100, messages=messages)
    with client.messages.stream(model=model, max_tokens=100, messages=messages) as stream:
        citations = [e.citation for e in stream if e.type == "citation"]
        final = stream.get_final_message()
    assert [c for b in whole.content for c in (b.citations or [])] == citations  # type: ignore[union-attr]
    assert citations
    assert final.model_dump(exclude={"id"}) == whole.model_dump(exclude={"id"})
    assert final.content[0].citations[0].type == "char_location"  # type: ignore[union-attr,index]
    flags = [block.model_dump().get("unsupported", False) for block in final.content]
    assert flags == ([False, False, True] if model == "wandering" else [False] * len(flags))


def test_sdk_errors_carry_the_request_id(client: TestClient) -> None:
    with pytest.raises(anthropic.NotFoundError) as raised:
        sdk(client).messages.create(
            model="nope", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
    assert raised.value.request_id is not None and raised.value.request_id.startswith("req_")
    with pytest.raises(anthropic.BadRequestError):
        sdk(client).messages.create(
            model="citewell-agent",
            max_tokens=5,
            messages=sdk_messages([text_doc(GRASS), text_doc(GRASS, cite=False)], "sky?"),
        )


def test_the_async_sdk_works_over_the_asgi_transport(client: TestClient) -> None:
    import anyio

    async def run() -> anthropic.types.Message:
        transport = httpx2.ASGITransport(app=client.app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://testserver") as http:
            async_client = anthropic.AsyncAnthropic(
                api_key="k", base_url="http://testserver", http_client=http
            )
            async with async_client.messages.stream(
                model="citewell-agent",
                max_tokens=50,
                messages=sdk_messages([text_doc(GRASS)], "What color is the sky?"),
            ) as stream:
                return await stream.get_final_message()

    final = anyio.run(run)
    assert final.content[0].citations[0].cited_text == "The sky is blue."  # type: ignore[union-attr,index]
