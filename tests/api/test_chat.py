"""POST /v1/chat/completions: url_citation annotations, the appendix, chunks, errors."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.answering import (
    ANSWER,
    FIRST,
    POLICY,
    SECOND,
    UNSUPPORTED,
    WARRANTY,
    Scripted,
    answering,
    scripted,
    sse,
    support,
)
from tests.api.conftest import assert_error

__all__ = ["answering", "scripted"]  # fixtures

APPENDIX = "\n\nSources:\n[1] policy.md (§ Refunds)\n[2] warranty.txt"
QUESTION = [{"role": "user", "content": "refunds and warranty"}]


def chunk_of(source_id: str) -> str:
    """The id of a one-chunk source's chunk."""
    return f"chk_{source_id.removeprefix('src_')}_0"


def complete(client: TestClient, messages: list[dict[str, Any]] = QUESTION, **body: Any) -> Any:
    body.setdefault("model", "scripted")
    response = client.post("/v1/chat/completions", json={"messages": messages, **body})
    assert response.status_code == 200, response.text
    return response.json()


def opened(client: TestClient, annotations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The annotations with each signed url replaced by what it opens.

    Two answers made a second apart carry different urls for the same source: a link's expiry
    is part of what it signs.
    """
    return [
        {
            "type": a["type"],
            "url_citation": {**a["url_citation"], "url": client.get(a["url_citation"]["url"]).text},
        }
        for a in annotations
    ]


def test_a_completion_cites_with_url_citations_and_lists_its_sources(
    answering: TestClient,
) -> None:
    completion = complete(answering)
    key = completion["id"].removeprefix("chatcmpl-")
    usage = completion.pop("usage")
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    message = completion["choices"][0]["message"]
    ids = {a["url_citation"]["title"]: a["url_citation"]["file_id"] for a in message["annotations"]}
    urls = [a["url_citation"].pop("url") for a in message["annotations"]]
    base = "http://testserver/v1/sources"
    refunds = "Refunds are paid within thirty days of the request."
    policy = answering.get(f"{base}/{ids['policy.md']}/text").json()["text"]
    assert completion == {
        "id": f"chatcmpl-{key}",
        "object": "chat.completion",
        "created": completion["created"],
        "model": "scripted",
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "logprobs": None,
                "message": {
                    "role": "assistant",
                    "content": ANSWER + APPENDIX,
                    "refusal": None,
                    "unsupported_claims": [],
                    "annotations": [
                        {
                            "type": "url_citation",
                            "url_citation": {
                                "start_index": 0,
                                "end_index": len(FIRST),
                                "title": "policy.md",
                                "source_index": 1,
                                "file_id": ids["policy.md"],
                                "cited_text": refunds,
                                "cited_start_index": policy.index(refunds),
                                "cited_end_index": policy.index(refunds) + len(refunds),
                                "chunk_id": chunk_of(ids["policy.md"]),
                                "page_number": None,
                                "page_label": None,
                                "support": support(FIRST, refunds),
                                "regions": [],
                                "conflict_side": None,
                            },
                        },
                        {
                            "type": "url_citation",
                            "url_citation": {
                                "start_index": len(FIRST) + 1,
                                "end_index": len(ANSWER),
                                "title": "warranty.txt",
                                "source_index": 2,
                                "file_id": ids["warranty.txt"],
                                "cited_text": WARRANTY,
                                "cited_start_index": 0,
                                "cited_end_index": len(WARRANTY),
                                "chunk_id": chunk_of(ids["warranty.txt"]),
                                "page_number": None,
                                "page_label": None,
                                "support": support(SECOND, WARRANTY),
                                "regions": [],
                                "conflict_side": None,
                            },
                        },
                    ],
                },
            }
        ],
        "metadata": {"grounded_sources_state": "available"},
    }
    # Each url is a signed link that opens the cited source's original.
    assert all(url.startswith("http://testserver/v1/links/") for url in urls)
    assert [answering.get(url).text for url in urls] == [POLICY, WARRANTY]


def test_options_come_in_metadata(answering: TestClient) -> None:
    legacy = complete(answering, metadata={"citation_compat": "legacy", "sources_appendix": "omit"})
    message = legacy["choices"][0]["message"]
    assert message["content"] == f"{FIRST}[1] {SECOND}[2]"
    spans = [
        (a["url_citation"]["start_index"], a["url_citation"]["end_index"])
        for a in message["annotations"]
    ]
    assert [message["content"][s:e] for s, e in spans] == [FIRST, SECOND]
    error = assert_error(
        answering.post(
            "/v1/chat/completions",
            json={"messages": QUESTION, "metadata": {"citation_compat": "x"}},
        ),
        400,
    )
    assert error["param"] == "metadata.citation_compat"


def test_roles_become_instructions_history_and_question(
    answering: TestClient, scripted: Scripted
) -> None:
    complete(
        answering,
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi."},
            {"role": "user", "content": [{"type": "text", "text": "refunds"}]},
        ],
    )
    evidence = scripted.seen[-1]
    assert (evidence.question, evidence.instructions) == ("refunds", "Be brief.")
    assert [(t.role, t.text) for t in evidence.history] == [("user", "Hello"), ("assistant", "Hi.")]


def test_grounding_states(answering: TestClient) -> None:
    hidden = complete(answering, model="hidden")
    assert hidden["choices"][0]["message"]["content"] == ANSWER
    assert hidden["choices"][0]["message"]["annotations"] == []
    assert hidden["metadata"] == {"grounded_sources_state": "hidden"}
    declined = complete(answering, model="declining")
    assert declined["metadata"] == {"grounded_sources_state": "missing"}
    none = complete(answering, model="citewell-agent", tool_choice="none")
    assert none["metadata"] == {"grounded_sources_state": "none"}


def test_a_stream_sends_text_then_all_annotations_in_one_chunk(answering: TestClient) -> None:
    whole = complete(answering)["choices"][0]["message"]
    sent = answering.post(
        "/v1/chat/completions",
        json={
            "model": "scripted",
            "messages": QUESTION,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    assert sent.headers["content-type"].startswith("text/event-stream")
    chunks = sse(sent.text, named=False)
    assert chunks[-1] == {"type": "[DONE]"}
    deltas = [c["choices"][0]["delta"] for c in chunks[:-2]]
    assert deltas[0] == {"role": "assistant", "content": "", "refusal": None}
    assert deltas[1] == {"content": FIRST}  # as soon as the generator wrote it
    assert all(set(d) == {"content"} for d in deltas[1:-2])
    assert "".join(d["content"] for d in deltas[1:-2]) == ANSWER + APPENDIX
    assert deltas[-1] == {}
    assert set(deltas[-2]) == {"annotations", "unsupported_claims"}
    assert deltas[-2]["unsupported_claims"] == []
    assert opened(answering, deltas[-2]["annotations"]) == opened(answering, whole["annotations"])
    assert chunks[-3]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-2]["choices"] == [] and chunks[-2]["usage"]["total_tokens"] > 0


def test_an_unsupported_claim_is_flagged_whole_and_streamed(answering: TestClient) -> None:
    whole = complete(answering, model="wandering")["choices"][0]["message"]
    start = whole["content"].index(UNSUPPORTED)
    assert whole["content"].startswith(f"{FIRST} {UNSUPPORTED}")
    assert whole["unsupported_claims"] == [
        {"start_index": start, "end_index": start + len(UNSUPPORTED)}
    ]
    assert all(a["url_citation"]["end_index"] <= start for a in whole["annotations"])
    sent = answering.post(
        "/v1/chat/completions",
        json={"model": "wandering", "messages": QUESTION, "stream": True},
    )
    deltas = [c["choices"][0]["delta"] for c in sse(sent.text, named=False)[:-1]]
    (grounding,) = [d for d in deltas if "annotations" in d]
    assert grounding["unsupported_claims"] == whole["unsupported_claims"]
    assert opened(answering, grounding["annotations"]) == opened(answering, whole["annotations"])


def test_generator_failures(answering: TestClient) -> None:
    assert_error(
        answering.post("/v1/chat/completions", json={"model": "broken", "messages": QUESTION}),
        502,
        code="generator_unavailable",
    )
    sent = answering.post(
        "/v1/chat/completions", json={"model": "slow", "messages": QUESTION, "stream": True}
    )
    last = sse(sent.text, named=False)[-1]
    assert last == {
        "error": {
            "message": "The model did not answer in time.",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": "gpt-4o", "messages": QUESTION}, 404, "model"),
        ({"messages": []}, 400, "messages"),
        ({"messages": "hello"}, 400, "messages"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, 400, "messages[0].role"),
        ({"messages": [{"role": "system", "content": "x"}]}, 400, "messages"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, None),
        ({"messages": QUESTION, "n": 2}, 400, "n"),
        ({"messages": QUESTION, "tools": [{"type": "function"}]}, 400, "tools"),
        ({"messages": QUESTION, "response_format": {"type": "json_object"}}, 400, None),
    ],
)
def test_bad_requests_get_openai_errors(
    answering: TestClient, body: dict[str, Any], status: int, param: str | None
) -> None:
    error = assert_error(answering.post("/v1/chat/completions", json=body), status)
    if param is not None:
        assert error["param"] == param
