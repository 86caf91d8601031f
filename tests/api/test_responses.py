"""POST /v1/responses and GET /v1/responses/{id}: shapes, options, states, streams, errors."""

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

RESULTS = ["file_search_call.results"]


def respond(client: TestClient, question: str = "refunds and warranty", **body: Any) -> Any:
    body.setdefault("model", "scripted")
    response = client.post("/v1/responses", json={"input": question, **body})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    return response.json()


def chunk_of(source_id: str) -> str:
    """The id of a one-chunk source's chunk."""
    return f"chk_{source_id.removeprefix('src_')}_0"


def part(response: dict[str, Any]) -> dict[str, Any]:
    content: dict[str, Any] = response["output"][-1]["content"][0]
    return content


def test_an_answer_is_a_response_with_a_search_and_a_cited_message(answering: TestClient) -> None:
    response = respond(answering)
    key = response["id"].removeprefix("resp_")
    usage = response.pop("usage")
    assert usage["input_tokens"] > 0 and usage["output_tokens"] == 16
    assert response["output"][0] == {
        "type": "file_search_call",
        "id": f"fs_{key}",
        "status": "completed",
        "queries": ["refunds and warranty"],
        "results": None,
    }
    sources = {c["filename"]: c["file_id"] for c in part(response)["annotations"]}
    refunds = "Refunds are paid within thirty days of the request."
    # The Markdown's canonical text drops the heading's '#': offsets index that text.
    policy = answering.get(f"/v1/sources/{sources['policy.md']}/text").json()["text"]
    assert refunds in POLICY and refunds in policy
    assert response["output"][1] == {
        "type": "message",
        "id": f"msg_{key}",
        "status": "completed",
        "role": "assistant",
        "content": [
            {
                "type": "output_text",
                "text": ANSWER,
                "logprobs": [],
                "unsupported_claims": [],
                "annotations": [
                    {
                        "type": "file_citation",
                        "file_id": sources["policy.md"],
                        "filename": "policy.md",
                        "index": len(FIRST),
                        "start_index": 0,
                        "end_index": len(FIRST),
                        "source_index": 1,
                        "cited_text": refunds,
                        "cited_start_index": policy.index(refunds),
                        "cited_end_index": policy.index(refunds) + len(refunds),
                        "chunk_id": chunk_of(sources["policy.md"]),
                        "page_number": None,
                        "page_label": None,
                        "support": support(FIRST, refunds),
                        "regions": [],
                        "conflict_side": None,
                    },
                    {
                        "type": "file_citation",
                        "file_id": sources["warranty.txt"],
                        "filename": "warranty.txt",
                        "index": len(ANSWER),
                        "start_index": len(FIRST) + 1,
                        "end_index": len(ANSWER),
                        "source_index": 2,
                        "cited_text": WARRANTY,
                        "cited_start_index": 0,
                        "cited_end_index": len(WARRANTY),
                        "chunk_id": chunk_of(sources["warranty.txt"]),
                        "page_number": None,
                        "page_label": None,
                        "support": support(SECOND, WARRANTY),
                        "regions": [],
                        "conflict_side": None,
                    },
                ],
            }
        ],
    }
    for annotation in part(response)["annotations"]:
        text = answering.get(f"/v1/sources/{annotation['file_id']}/text").json()["text"]
        start, end = annotation["cited_start_index"], annotation["cited_end_index"]
        assert text[start:end] == annotation["cited_text"]
    assert response["metadata"] == {"grounded_sources_state": "available"}
    assert (response["object"], response["status"], response["model"]) == (
        "response",
        "completed",
        "scripted",
    )


def test_the_default_agent_answers_when_no_model_is_named(answering: TestClient) -> None:
    response = respond(answering, "How long do refunds take?", model=None)
    assert response["model"] == "citewell-agent"
    assert part(response)["text"] == "Refunds are paid within thirty days of the request."


def test_legacy_markers_shift_every_later_annotation(answering: TestClient) -> None:
    response = respond(answering, metadata={"citation_compat": "legacy"})
    text = part(response)["text"]
    assert text == f"{FIRST}[1] {SECOND}[2]"
    spans = [(a["start_index"], a["end_index"], a["index"]) for a in part(response)["annotations"]]
    assert spans == [(0, len(FIRST), len(FIRST)), (len(FIRST) + 4, len(text) - 3, len(text) - 3)]
    assert response["metadata"] == {
        "citation_compat": "legacy",
        "grounded_sources_state": "available",
    }


def test_the_appendix_lists_the_sources_after_the_answer(answering: TestClient) -> None:
    response = respond(answering, metadata={"sources_appendix": "include"})
    assert part(response)["text"] == (
        ANSWER + "\n\nSources:\n[1] policy.md (§ Refunds)\n[2] warranty.txt"
    )
    assert [a["end_index"] for a in part(response)["annotations"]] == [len(FIRST), len(ANSWER)]


@pytest.mark.parametrize(
    ("key", "value"), [("citation_compat", "inline"), ("sources_appendix", "yes")]
)
def test_unknown_render_options_are_refused(answering: TestClient, key: str, value: str) -> None:
    response = answering.post("/v1/responses", json={"input": "refunds", "metadata": {key: value}})
    error = assert_error(response, 400, code="invalid_value")
    assert error["param"] == f"metadata.{key}"


def test_results_are_sent_only_when_included(answering: TestClient) -> None:
    response = respond(answering, include=RESULTS)
    results = response["output"][0]["results"]
    assert {r["filename"] for r in results} == {"policy.md", "warranty.txt"}
    numbers = {r["filename"]: r["attributes"]["source_index"] for r in results}
    assert numbers == {"policy.md": 1, "warranty.txt": 2}
    policy = next(r for r in results if r["filename"] == "policy.md")
    assert set(policy["attributes"]) == {
        "source_index",
        "label",
        "locator_label",
        "modality",
        "mime_type",
        "access_url",
        "text",
        "excerpt",
    }
    assert policy["attributes"]["text"] == policy["text"]
    # Each result's signed link opens its source's original, without a key.
    originals = {"policy.md": POLICY, "warranty.txt": WARRANTY}
    for result in results:
        link = result["attributes"]["access_url"]
        assert link.startswith("http://testserver/v1/links/")
        assert answering.get(link).text == originals[result["filename"]]


def test_a_hidden_agent_keeps_every_source_back(answering: TestClient) -> None:
    response = respond(
        answering,
        model="hidden",
        include=RESULTS,
        metadata={"citation_compat": "legacy", "sources_appendix": "include"},
    )
    assert response["metadata"]["grounded_sources_state"] == "hidden"
    assert response["output"][0]["results"] is None
    assert (part(response)["text"], part(response)["annotations"]) == (ANSWER, [])


def test_a_declined_answer_is_missing_its_sources(answering: TestClient) -> None:
    response = respond(answering, model="declining")
    assert response["metadata"]["grounded_sources_state"] == "missing"
    assert part(response) == {
        "type": "output_text",
        "text": "The available sources do not answer this question.",
        "annotations": [],
        "logprobs": [],
    }


def test_tool_choice_none_answers_without_looking_anything_up(
    answering: TestClient, scripted: Scripted
) -> None:
    response = respond(answering, "How long do refunds take?", model=None, tool_choice="none")
    assert response["metadata"]["grounded_sources_state"] == "none"
    assert [item["type"] for item in response["output"]] == ["message"]


def test_the_file_search_tool_chooses_buckets_and_filters(
    answering: TestClient, scripted: Scripted
) -> None:
    tool = {"type": "file_search", "vector_store_ids": ["shop"], "max_num_results": 1}
    response = respond(answering, "thirty days refunds", model=None, tools=[tool])
    assert response["tools"] == [
        {**tool, "filters": None, "ranking_options": {"ranker": "auto", "score_threshold": 0.0}}
    ]
    assert part(response)["annotations"][0]["filename"] == "policy.md"
    empty = respond(answering, model=None, tools=[{**tool, "vector_store_ids": ["other"]}])
    assert empty["metadata"]["grounded_sources_state"] == "missing"
    filtered = {**tool, "filters": {"type": "eq", "key": "filename", "value": "warranty.txt"}}
    only = respond(answering, "thirty days refunds", model=None, tools=[filtered])
    assert only["metadata"]["grounded_sources_state"] == "missing"
    unknown = answering.post(
        "/v1/responses",
        json={"input": "x", "tools": [{"type": "file_search", "vector_store_ids": ["nope"]}]},
    )
    assert_error(unknown, 404, code="not_found")


def test_messages_become_history_and_instructions(
    answering: TestClient, scripted: Scripted
) -> None:
    respond(
        answering,
        [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": "Hello"},
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Hi.", "annotations": []}],
            },
            {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": []},
            {"role": "user", "content": [{"type": "input_text", "text": "refunds"}]},
        ],
        instructions="Answer from the policy.",
    )
    evidence = scripted.seen[-1]
    assert evidence.question == "refunds"
    assert evidence.instructions == "Answer from the policy.\n\nBe brief."
    assert [(t.role, t.text) for t in evidence.history] == [("user", "Hello"), ("assistant", "Hi.")]


def test_a_stored_response_reads_back_exactly_and_continues(
    answering: TestClient, scripted: Scripted
) -> None:
    sent = answering.post("/v1/responses", json={"model": "scripted", "input": "refunds"})
    stored = answering.get(f"/v1/responses/{sent.json()['id']}")
    assert stored.status_code == 200 and stored.content == sent.content
    follow = respond(answering, "and the warranty?", previous_response_id=sent.json()["id"])
    assert follow["previous_response_id"] == sent.json()["id"]
    assert [(t.role, t.text) for t in scripted.seen[-1].history] == [
        ("user", "refunds"),
        ("assistant", ANSWER),
    ]
    unknown = answering.post(
        "/v1/responses", json={"input": "x", "previous_response_id": "resp_nope"}
    )
    assert_error(unknown, 400, code="previous_response_not_found")
    assert_error(answering.get("/v1/responses/resp_nope"), 404, code="not_found")
    unstored = respond(answering, store=False)
    assert_error(answering.get(f"/v1/responses/{unstored['id']}"), 404)


def test_an_unsupported_claim_is_flagged_whole_and_at_the_end_of_a_stream(
    answering: TestClient,
) -> None:
    whole = part(respond(answering, "How long do refunds take?", model="wandering"))
    start = whole["text"].index(UNSUPPORTED)
    assert whole["text"] == f"{FIRST} {UNSUPPORTED}"
    assert whole["unsupported_claims"] == [{"start_index": start, "end_index": len(whole["text"])}]
    assert [a["end_index"] for a in whole["annotations"]] == [len(FIRST)]
    sent = answering.post(
        "/v1/responses",
        json={"model": "wandering", "input": "How long do refunds take?", "stream": True},
    )
    done = [e["part"] for e in sse(sent.text) if e["type"] == "response.content_part.done"]
    assert [p["unsupported_claims"] for p in done] == [whole["unsupported_claims"]]


def test_a_stream_follows_openais_event_sequence(answering: TestClient) -> None:
    sent = answering.post(
        "/v1/responses",
        json={
            "model": "scripted",
            "input": "refunds and warranty",
            "stream": True,
            "metadata": {"citation_compat": "legacy"},
        },
    )
    assert sent.status_code == 200
    assert sent.headers["content-type"].startswith("text/event-stream")
    events = sse(sent.text)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [
        (e["type"], e.get("delta"), e.get("annotation", {}).get("source_index")) for e in events
    ]
    assert kinds == [
        ("response.created", None, None),
        ("response.in_progress", None, None),
        ("response.output_item.added", None, None),
        ("response.file_search_call.in_progress", None, None),
        ("response.file_search_call.searching", None, None),
        ("response.file_search_call.completed", None, None),
        ("response.output_item.done", None, None),
        ("response.output_item.added", None, None),
        ("response.content_part.added", None, None),
        ("response.output_text.delta", f"{FIRST}[1]", None),
        ("response.output_text.annotation.added", None, 1),
        ("response.output_text.delta", f" {SECOND}[2]", None),
        ("response.output_text.annotation.added", None, 2),
        ("response.output_text.done", None, None),
        ("response.content_part.done", None, None),
        ("response.output_item.done", None, None),
        ("response.completed", None, None),
    ]
    final = events[-1]["response"]
    added = [e["annotation"] for e in events if "annotation" in e]
    assert added == part(final)["annotations"]
    assert [a["cited_text"][:7] for a in added] == ["Refunds", "Every b"]
    assert events[0]["response"]["id"] == final["id"]
    assert events[0]["response"]["status"] == "in_progress"
    assert events[0]["response"]["output"] == [] and events[0]["response"]["usage"] is None
    stored = answering.get(f"/v1/responses/{final['id']}").json()
    assert stored == final


def test_a_generator_failure_is_a_502_or_504_and_a_failed_stream(answering: TestClient) -> None:
    broken = answering.post("/v1/responses", json={"model": "broken", "input": "refunds"})
    assert assert_error(broken, 502, code="generator_unavailable")["message"] == (
        "The model server refused."
    )
    assert broken.headers["x-should-retry"] == "false"
    slow = answering.post("/v1/responses", json={"model": "slow", "input": "refunds"})
    assert_error(slow, 504, code="generator_timeout")
    streamed = answering.post(
        "/v1/responses", json={"model": "broken", "input": "refunds", "stream": True}
    )
    events = sse(streamed.text)
    assert events[-2]["type"] == "response.output_text.delta"
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["error"] == {
        "code": "server_error",
        "message": "The model server refused.",
    }


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": "gpt-4o", "input": "x"}, 404, "model"),
        ({}, 400, "input"),
        ({"input": 42}, 400, "input"),
        ({"input": []}, 400, "input"),
        ({"input": [{"role": "assistant", "content": "hi"}]}, 400, "input"),
        ({"input": [{"role": "user", "content": [{"type": "input_image"}]}]}, 400, None),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, 400, "input[0]"),
        ({"input": "x", "tools": [{"type": "web_search"}]}, 400, None),
        ({"input": "x", "metadata": {"k" * 65: "v"}}, 400, "metadata"),
        ({"input": "x", "metadata": {"k": 1}}, 400, None),
        ({"input": "x", "background": True}, 400, "background"),
        ({"input": "x", "unknown": 1}, 400, "unknown"),
        ({"input": "x" * 300_000}, 400, "input"),
    ],
)
def test_bad_requests_get_openai_errors(
    answering: TestClient, body: dict[str, Any], status: int, param: str | None
) -> None:
    error = assert_error(answering.post("/v1/responses", json=body), status)
    if param is not None:
        assert error["param"] == param
    if status == 404:
        assert error["code"] == "model_not_found"
