"""The Anthropic Messages renderer: blocks, citation locations, and the stream's events."""

from __future__ import annotations

import json
from typing import Any

from citewell.events import Citable
from citewell.model import Answer, GroundingState, Page, Span
from citewell.render.messages import MessageOptions, render_message, render_message_stream
from tests.render.conftest import (
    FIRST,
    PASSAGES,
    SECOND,
    TEXT,
    events_of,
    link,
    make_answer,
    region_wire,
)

OPTIONS = MessageOptions(id="abc", model="citewell-agent", created_at=0, access_url=link)


def parse(stream: list[str]) -> list[dict[str, Any]]:
    events = []
    for message in "".join(stream).split("\n\n"):
        if message:
            name, data = message.split("\n")
            parsed = json.loads(data.removeprefix("data: "))
            assert name == f"event: {parsed['type']}"
            events.append(parsed)
    return events


def test_retrieved_passages_are_cited_as_search_results(answer: Answer) -> None:
    message = render_message(answer, OPTIONS)
    assert message["id"] == "msg_abc"
    assert [b["text"] for b in message["content"]] == [FIRST, " ", SECOND]
    assert "".join(b["text"] for b in message["content"]) == TEXT
    first, space, second = message["content"]
    assert "citations" not in space
    assert first["citations"] == [
        {
            "type": "search_result_location",
            "cited_text": FIRST,
            "search_result_index": 0,
            "source": link("src_policy"),
            "title": "refund_policy_2026.pdf",
            "start_block_index": 0,
            "end_block_index": 1,
            "regions": [region_wire(linked=True)],
        }
    ]
    assert [c["search_result_index"] for c in second["citations"]] == [0, 1]
    # The citation of a source without boxes is exactly Anthropic's.
    assert "regions" not in second["citations"][1]
    assert message["usage"]["output_tokens"] > 0 and message["usage"]["input_tokens"] > 0


def test_hidden_answers_are_one_plain_block() -> None:
    message = render_message(make_answer(GroundingState.HIDDEN), OPTIONS)
    assert message["content"] == [{"type": "text", "text": TEXT}]


def test_given_documents_are_cited_by_their_own_locations() -> None:
    pages = (
        Page(number=1, span=Span(start=0, end=10), width=1, height=1),
        Page(number=2, span=Span(start=10, end=len(FIRST)), width=1, height=1),
    )
    citables = {
        PASSAGES[0].chunk.id: Citable(
            kind="page_location", index=0, title="Policy", pages=pages, file_id="file_x"
        ),
        PASSAGES[1].chunk.id: Citable(
            kind="content_block_location", index=1, units=(PASSAGES[1].chunk.span,)
        ),
    }
    options = MessageOptions(id="abc", model="m", created_at=0, citables=citables, access_url=link)
    first, _, second = render_message(make_answer(), options)["content"]
    assert first["citations"] == [
        {
            "type": "page_location",
            "cited_text": FIRST,
            "document_index": 0,
            "document_title": "Policy",
            "start_page_number": 1,
            "end_page_number": 3,
            "file_id": "file_x",
        }
    ]
    assert second["citations"][1] == {
        "type": "content_block_location",
        "cited_text": SECOND,
        "document_index": 1,
        "document_title": None,
        "start_block_index": 0,
        "end_block_index": 1,
    }


def test_documents_without_citations_leave_their_claims_plain() -> None:
    citables = {
        p.chunk.id: Citable(kind="char_location", index=i, cite=False)
        for i, p in enumerate(PASSAGES)
    }
    options = MessageOptions(id="abc", model="m", created_at=0, citables=citables, access_url=link)
    assert render_message(make_answer(), options)["content"] == [{"type": "text", "text": TEXT}]


def test_the_stream_adds_up_to_the_message(answer: Answer) -> None:
    events = parse(list(render_message_stream(events_of(answer), OPTIONS)))
    kinds = [e["type"] for e in events]
    assert kinds == [
        "message_start",
        "ping",
        *["content_block_start", "content_block_delta", "content_block_delta"],
        "content_block_stop",
        *["content_block_start", "content_block_delta", "content_block_stop"],
        *["content_block_start", "content_block_delta", "content_block_delta"],
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    blocks: list[dict[str, Any]] = []
    for event in events:
        if event["type"] == "content_block_start":
            assert event["index"] == len(blocks)
            blocks.append(dict(event["content_block"]))
        elif event["type"] == "content_block_delta":
            delta, block = event["delta"], blocks[event["index"]]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            else:
                block["citations"] = [*block["citations"], delta["citation"]]
    final = render_message(answer, OPTIONS)
    assert blocks == final["content"]
    start, delta = events[0]["message"], events[-2]
    assert start["usage"]["input_tokens"] == final["usage"]["input_tokens"]
    assert delta["usage"]["output_tokens"] == final["usage"]["output_tokens"]
    assert delta["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
