"""The Chat Completions dialect: url_citation annotations, the appendix, and the chunks."""

from __future__ import annotations

import json
from typing import Any

from citewell.model import Answer
from citewell.render.chat import ChatOptions, render_completion, render_completion_stream
from tests.render.conftest import FIRST, SECOND, SUPPORT, TEXT, events_of, link, region_wire

APPENDIX = "\n\nSources:\n[1] refund_policy_2026.pdf (p. 4)\n[2] warranty.md (§ Warranty)"


def options(**overrides: Any) -> ChatOptions:
    return ChatOptions(
        id="abc",
        model="citewell-agent",
        created_at=1000,
        access_url=link,
        **overrides,
    )


def url_citation(start: int, end: int, source: str, title: str, number: int) -> dict[str, Any]:
    cited, page = (FIRST, 4) if source == "src_policy" else (SECOND, None)
    return {
        "type": "url_citation",
        "url_citation": {
            "start_index": start,
            "end_index": end,
            "url": link(source),
            "title": title,
            "source_index": number,
            "file_id": source,
            "cited_text": cited,
            "cited_start_index": 0,
            "cited_end_index": len(cited),
            "chunk_id": f"chk_{source}_0",
            "page_number": page,
            "page_label": None,
            "support": SUPPORT,
            "regions": [region_wire(linked=True)] if page else [],
            "conflict_side": None,
        },
    }


def test_a_completion_has_openais_shape_and_lists_sources_by_default(answer: Answer) -> None:
    completion = render_completion(answer, options())
    usage = completion.pop("usage")
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    second = (len(FIRST) + 1, len(TEXT))
    assert completion == {
        "id": "chatcmpl-abc",
        "object": "chat.completion",
        "created": 1000,
        "model": "citewell-agent",
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "logprobs": None,
                "message": {
                    "role": "assistant",
                    "content": TEXT + APPENDIX,
                    "refusal": None,
                    "unsupported_claims": [],
                    "annotations": [
                        url_citation(0, len(FIRST), "src_policy", "refund_policy_2026.pdf", 1),
                        url_citation(*second, "src_policy", "refund_policy_2026.pdf", 1),
                        url_citation(*second, "src_warranty", "warranty.md", 2),
                    ],
                },
            }
        ],
        "metadata": {"grounded_sources_state": "available"},
    }


def test_chunks_carry_text_then_every_annotation_in_one_delta(answer: Answer) -> None:
    lines = list(render_completion_stream(events_of(answer), options(citation_compat="legacy")))
    assert lines[-1] == "data: [DONE]\n\n"
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert {(c["id"], c["object"], c["created"]) for c in chunks} == {
        ("chatcmpl-abc", "chat.completion.chunk", 1000)
    }
    deltas = [c["choices"][0]["delta"] for c in chunks]
    final = render_completion(answer, options(citation_compat="legacy"))["choices"][0]["message"]
    assert deltas[0] == {"role": "assistant", "content": "", "refusal": None}
    assert [d.get("content") for d in deltas[1:4]] == [f"{FIRST}[1]", f" {SECOND}[1][2]", APPENDIX]
    assert deltas[4] == {"annotations": final["annotations"], "unsupported_claims": []}
    assert deltas[5] == {} and chunks[5]["choices"][0]["finish_reason"] == "stop"
    assert "".join(d.get("content", "") for d in deltas) == final["content"]


def test_usage_comes_last_when_asked_for(answer: Answer) -> None:
    lines = list(render_completion_stream(events_of(answer), options(include_usage=True)))
    usage = json.loads(lines[-2].removeprefix("data: "))
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] > 0
    assert all(json.loads(line[6:])["usage"] is None for line in lines[:-2])
