"""The Responses dialect: the response object and its event stream, exactly."""

from __future__ import annotations

import json
from typing import Any

from citewell.model import Answer, Claim, GroundingState, Span
from citewell.render.responses import ResponseOptions, render_response, render_response_stream
from tests.render.conftest import (
    FIRST,
    SECOND,
    SUPPORT,
    TEXT,
    events_of,
    link,
    make_answer,
    region_wire,
)

TOOL = {
    "type": "file_search",
    "vector_store_ids": ["shop"],
    "filters": None,
    "max_num_results": 20,
    "ranking_options": {"ranker": "auto", "score_threshold": 0.0},
}


def options(**overrides: Any) -> ResponseOptions:
    return ResponseOptions(id="abc", model="citewell-agent", created_at=1000, **overrides)


def events(answer: Answer, opts: ResponseOptions) -> list[dict[str, Any]]:
    out = []
    for message in render_response_stream(events_of(answer), opts):
        event_line, data_line, blank = message.split("\n", 2)
        data = json.loads(data_line.removeprefix("data: "))
        assert event_line == f"event: {data['type']}" and blank == "\n"
        out.append(data)
    return out


def test_a_response_has_every_field_openai_sends(answer: Answer) -> None:
    response = render_response(answer, options(tools=(TOOL,), metadata={"team": "shop"}))
    output = response.pop("output")
    usage = response.pop("usage")
    assert response == {
        "id": "resp_abc",
        "object": "response",
        "created_at": 1000,
        "status": "completed",
        "completed_at": int(answer.created_at.timestamp()),
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": "citewell-agent",
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [TOOL],
        "top_p": 1.0,
        "truncation": "disabled",
        "user": None,
        "metadata": {"team": "shop", "grounded_sources_state": "available"},
    }
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"] > 0
    assert output[0] == {
        "type": "file_search_call",
        "id": "fs_abc",
        "status": "completed",
        "queries": [answer.question],
        "results": None,
    }
    end = len(FIRST)
    policy = {
        "cited_text": FIRST,
        "cited_start_index": 0,
        "cited_end_index": len(FIRST),
        "chunk_id": "chk_src_policy_0",
        "page_number": 4,
        "page_label": None,
        "support": SUPPORT,
        "regions": [region_wire(linked=False)],
        "conflict_side": None,
    }
    warranty = {
        "cited_text": SECOND,
        "cited_start_index": 0,
        "cited_end_index": len(SECOND),
        "chunk_id": "chk_src_warranty_0",
        "page_number": None,
        "page_label": None,
        "support": SUPPORT,
        "regions": [],
        "conflict_side": None,
    }
    assert output[1] == {
        "type": "message",
        "id": "msg_abc",
        "status": "completed",
        "role": "assistant",
        "content": [
            {
                "type": "output_text",
                "text": TEXT,
                "logprobs": [],
                "unsupported_claims": [],
                "annotations": [
                    {
                        "type": "file_citation",
                        "file_id": "src_policy",
                        "filename": "refund_policy_2026.pdf",
                        "index": end,
                        "start_index": 0,
                        "end_index": end,
                        "source_index": 1,
                        **policy,
                    },
                    {
                        "type": "file_citation",
                        "file_id": "src_policy",
                        "filename": "refund_policy_2026.pdf",
                        "index": len(TEXT),
                        "start_index": end + 1,
                        "end_index": len(TEXT),
                        "source_index": 1,
                        **policy,
                    },
                    {
                        "type": "file_citation",
                        "file_id": "src_warranty",
                        "filename": "warranty.md",
                        "index": len(TEXT),
                        "start_index": end + 1,
                        "end_index": len(TEXT),
                        "source_index": 2,
                        **warranty,
                    },
                ],
            }
        ],
    }


def test_results_name_each_passage_its_number_in_the_answer_and_its_link(answer: Answer) -> None:
    response = render_response(
        answer,
        options(
            include=("file_search_call.results",),
            access_url=link,
        ),
    )
    first, second = response["output"][0]["results"]
    assert first == {
        "file_id": "src_policy",
        "filename": "refund_policy_2026.pdf",
        "score": 0.9,
        "text": FIRST,
        "attributes": {
            "source_index": 1,
            "label": "refund_policy_2026.pdf (p. 4)",
            "page_number": 4,
            "locator_label": "p. 4",
            "modality": "text",
            "mime_type": "application/pdf",
            "access_url": "http://cw.example/v1/links/src_policy",
            "text": FIRST,
            "excerpt": FIRST,
            "preview": link.highlight("src_policy", 4, Span(start=0, end=len(FIRST))),
            "media_id": link.page("src_policy", 4),
        },
    }
    assert second["attributes"]["label"] == "warranty.md (§ Warranty)"
    assert "page_number" not in second["attributes"]
    assert second["attributes"]["access_url"] == "http://cw.example/v1/links/src_warranty"
    unlinked = render_response(answer, options(include=("file_search_call.results",)))
    assert "access_url" not in unlinked["output"][0]["results"][0]["attributes"]


def test_hidden_missing_and_none_answers_show_no_sources() -> None:
    asked = options(include=("file_search_call.results",), sources_appendix="include")
    hidden = render_response(
        make_answer(GroundingState.HIDDEN),
        options(
            include=("file_search_call.results",), sources_appendix="include", show_sources=False
        ),
    )
    assert hidden["output"][0]["results"] is None
    assert hidden["output"][1]["content"][0]["annotations"] == []
    assert hidden["output"][1]["content"][0]["text"] == TEXT
    missing = render_response(make_answer(GroundingState.MISSING), asked)
    assert missing["metadata"]["grounded_sources_state"] == "missing"
    assert missing["output"][1]["content"][0] == {
        "type": "output_text",
        "text": TEXT,
        "annotations": [],
        "logprobs": [],
    }
    none = render_response(make_answer(GroundingState.NONE), options(retrieve=False))
    assert [item["type"] for item in none["output"]] == ["message"]
    assert none["output"][0]["id"] == "msg_abc"


def test_a_stream_sends_annotations_right_after_their_claim(answer: Answer) -> None:
    sent = events(answer, options(citation_compat="legacy"))
    assert [e["sequence_number"] for e in sent] == list(range(len(sent)))
    assert [(e["type"], e.get("delta"), e.get("annotation_index")) for e in sent[8:-4]] == [
        ("response.content_part.added", None, None),
        ("response.output_text.delta", f"{FIRST}[1]", None),
        ("response.output_text.annotation.added", None, 0),
        ("response.output_text.delta", f" {SECOND}[1][2]", None),
        ("response.output_text.annotation.added", None, 1),
        ("response.output_text.annotation.added", None, 2),
    ]
    final = sent[-1]["response"]
    assert final == render_response(answer, options(citation_compat="legacy"))
    part = final["output"][1]["content"][0]
    assert [e["annotation"] for e in sent if "annotation" in e] == part["annotations"]
    assert sent[-4]["text"] == part["text"] == f"{FIRST}[1] {SECOND}[1][2]"


def test_native_deltas_go_out_as_they_come(answer: Answer) -> None:
    sent = events(answer, options(sources_appendix="include"))
    deltas = [e["delta"] for e in sent if e["type"] == "response.output_text.delta"]
    assert deltas[:3] == ["Refunds are paid ", "within thirty days.", f" {SECOND}"]
    assert deltas[3].startswith("\n\nSources:\n[1] ")
    assert "".join(deltas) == sent[-1]["response"]["output"][1]["content"][0]["text"]


def test_a_failed_stream_says_why() -> None:
    from citewell.render.responses import ResponseStream

    stream = ResponseStream(options())
    [created, in_progress, failed] = [
        json.loads(m.split("\n")[1].removeprefix("data: ")) for m in stream.fail("It broke.")
    ]
    assert (created["type"], in_progress["type"], failed["type"]) == (
        "response.created",
        "response.in_progress",
        "response.failed",
    )
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"] == {"code": "server_error", "message": "It broke."}


def test_an_unsupported_claim_is_flagged_on_the_legacy_text_not_cited(answer: Answer) -> None:
    third = "The moon is made of cheese."
    flagged = answer.model_copy(
        update={
            "text": f"{answer.text} {third}",
            "claims": (
                *answer.claims,
                Claim(
                    span=Span(start=len(TEXT) + 1, end=len(TEXT) + 1 + len(third)), supported=False
                ),
            ),
        }
    )
    part = render_response(flagged, options(citation_compat="legacy"))["output"][-1]["content"][0]
    start = part["text"].index(third)
    assert part["text"][start - 7 :] == f"[1][2] {third}"
    assert part["unsupported_claims"] == [{"start_index": start, "end_index": start + len(third)}]
    assert all(a["end_index"] <= start for a in part["annotations"])
