"""The official ``openai`` SDK against a real citewell server: Responses, Chat Completions, models.

Runs twice under ``make test``: with the newest SDK (the main venv) and with openai 1.99.9
(``.venv-openai1``, ``--noconftest``). So this module imports nothing from citewell: the server
runs in a subprocess (``sdk_server.py``) with the interpreter that has citewell installed
(``CITEWELL_SERVER_PYTHON``, else this one if it has citewell, else ``.venv/bin/python``).

Grounding states: ``available`` (the default agent on a question the documents answer),
``hidden`` (the ``citewell-hidden`` agent, whose sources are not shown), ``missing`` (a question
the documents do not answer), ``none`` (``tool_choice="none"``: nothing is looked up).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.sdk_harness import HANDBOOK, multi_page_pdf, running_server

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

MEMBERSHIP = "How much does membership cost?"
MEMBERSHIP_ANSWER = (
    "Membership costs 40 euros a year, or 15 euros for students and people on a low income."
)
MACWRITE = "Which word processor did Apple make for the Macintosh?"
UNANSWERED = "What is the boiling point of liquid nitrogen?"
REFUSAL = "The available sources do not answer this question."
RESULTS = ["file_search_call.results"]
LEGACY = {"citation_compat": "legacy"}
APPENDIX = {"sources_appendix": "include"}
SDK_MAJOR = int(openai.__version__.split(".")[0])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_server(tmp_path_factory.mktemp("sdk")) as url:
        yield url


@pytest.fixture(scope="module")
def client(server: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0) as client:
        yield client


def plain(value: Any) -> Any:
    """An SDK object (or a plain dict, as some SDK versions give) as plain JSON data."""
    return value if isinstance(value, dict) else value.to_dict()


def ask(client: openai.OpenAI, question: str = MEMBERSHIP, **options: Any) -> dict[str, Any]:
    options.setdefault("model", "citewell-agent")
    response = client.responses.create(input=question, **options)
    data: dict[str, Any] = plain(response)
    assert response.output_text == message_part(data)["text"]
    return data


def message_part(response: dict[str, Any]) -> dict[str, Any]:
    message = response["output"][-1]
    assert message["type"] == "message" and message["role"] == "assistant"
    part: dict[str, Any] = message["content"][0]
    assert part["type"] == "output_text" and part["logprobs"] == []
    return part


def with_markers(text: str, annotations: list[dict[str, Any]]) -> str:
    """A client's renderer: ``[n]`` inserted at each annotation's index, last position first."""
    by_index: dict[int, list[int]] = {}
    for annotation in annotations:
        numbers = by_index.setdefault(annotation["index"], [])
        if annotation["source_index"] not in numbers:
            numbers.append(annotation["source_index"])
    for index in sorted(by_index, reverse=True):
        text = text[:index] + "".join(f"[{n}]" for n in by_index[index]) + text[index:]
    return text


def source_text(server: str, source_id: str) -> str:
    text: str = httpx.get(f"{server}/v1/sources/{source_id}/text").json()["text"]
    return text


CITED = (
    "cited_text",
    "cited_start_index",
    "cited_end_index",
    "chunk_id",
    "page_number",
    "page_label",
    "support",
    "regions",
    "conflict_side",
)
"""citewell's fields naming the cited range of the source, on every annotation."""


def check_cited_ranges(server: str, annotations: list[dict[str, Any]]) -> None:
    """Each annotation carries every cited-range field, and its range of the served canonical text
    is exactly its ``cited_text`` (Responses annotations are flat, Chat ones nest them in
    ``url_citation``)."""
    texts: dict[str, str] = {}
    for annotation in annotations:
        cited = annotation.get("url_citation", annotation)
        assert set(CITED) <= set(cited), cited
        text = texts.get(cited["file_id"]) or source_text(server, cited["file_id"])
        texts[cited["file_id"]] = text
        start, end = cited["cited_start_index"], cited["cited_end_index"]
        assert 0 <= start < end <= len(text)
        assert text[start:end] == cited["cited_text"]
        assert cited["chunk_id"].startswith("chk_")
        assert cited["support"] is None or 0 <= cited["support"] <= 1


def chunks_holding(server: str, query: str, annotation: dict[str, Any]) -> list[str]:
    """The chunks ``POST /v1/search`` finds for the query whose range holds the cited range."""
    found = httpx.post(
        f"{server}/v1/search", json={"query": query, "buckets": ["coop"]}, timeout=60
    ).json()["data"]
    return [
        r["chunk_id"]
        for r in found
        if r["file_id"] == annotation["file_id"]
        and r["span"]["start"] <= annotation["cited_start_index"]
        and annotation["cited_end_index"] <= r["span"]["end"]
    ]


# -- models ----------------------------------------------------------------------------------------
def test_the_models_are_the_agents(client: openai.OpenAI) -> None:
    models = list(client.models.list())
    assert [m.id for m in models] == [
        "citewell-agent",
        "citewell-hidden",
        "citewell-broken",
        "citewell-slow",
    ]
    assert {(m.object, m.owned_by) for m in models} == {("model", "citewell")}
    assert client.models.retrieve("citewell-hidden").id == "citewell-hidden"


# -- Responses, whole ------------------------------------------------------------------------------
def test_an_answer_cites_the_exact_sentence_it_states(client: openai.OpenAI, server: str) -> None:
    response = ask(client)
    assert response["status"] == "completed" and response["error"] is None
    assert response["metadata"] == {"grounded_sources_state": "available"}
    search, message = response["output"]
    assert search["type"] == "file_search_call" and search["status"] == "completed"
    assert search["queries"] == [MEMBERSHIP]
    assert search["results"] is None  # not asked for with include
    part = message_part(response)
    assert part["text"] == MEMBERSHIP_ANSWER
    assert part["unsupported_claims"] == []  # a citewell field, beside the SDK's
    [annotation] = part["annotations"]
    start = source_text(server, annotation["file_id"]).index(MEMBERSHIP_ANSWER)
    assert annotation == {
        "type": "file_citation",
        "file_id": annotation["file_id"],
        "filename": "bike-coop-handbook.md",
        "index": len(MEMBERSHIP_ANSWER),
        "start_index": 0,
        "end_index": len(MEMBERSHIP_ANSWER),
        "source_index": 1,
        "cited_text": MEMBERSHIP_ANSWER,
        "cited_start_index": start,
        "cited_end_index": start + len(MEMBERSHIP_ANSWER),
        "chunk_id": annotation["chunk_id"],
        "page_number": None,
        "page_label": None,
        "support": 1.0,
        "regions": [],
        "conflict_side": None,
    }
    assert annotation["chunk_id"] in chunks_holding(server, MEMBERSHIP, annotation)
    claim = part["text"][annotation["start_index"] : annotation["end_index"]]
    assert claim in source_text(server, annotation["file_id"])
    assert response["usage"]["total_tokens"] > 0


def test_results_carry_labels_pages_and_source_numbers(client: openai.OpenAI) -> None:
    response = ask(client, MACWRITE, include=RESULTS)
    results = response["output"][0]["results"]
    [annotation] = message_part(response)["annotations"]
    cited = [r for r in results if r["file_id"] == annotation["file_id"]]
    assert cited and results[0] == cited[0]
    best = cited[0]
    assert best["filename"] == "multi_page.pdf" and 0 < best["score"] <= 1
    attributes = best["attributes"]
    assert attributes["source_index"] == 1
    page = int(attributes["page_number"])  # the SDK types attribute numbers as floats
    assert attributes["label"] == f"multi_page.pdf (p. {page})"
    assert attributes["locator_label"] == f"p. {page}"
    assert (attributes["modality"], attributes["mime_type"]) == ("text", "application/pdf")
    assert attributes["text"] == best["text"]
    assert attributes["excerpt"] in best["text"]
    opened = httpx.get(attributes["access_url"])  # a signed link: no key needed
    assert opened.content == multi_page_pdf().read_bytes()
    others = [r for r in results if r["file_id"] != annotation["file_id"]]
    assert all("source_index" not in r["attributes"] for r in others)


def test_legacy_markers_are_the_annotations_inserted_into_the_native_text(
    client: openai.OpenAI,
) -> None:
    native = message_part(ask(client, MACWRITE))
    legacy = message_part(ask(client, MACWRITE, metadata=LEGACY))
    assert legacy["text"] == with_markers(native["text"], native["annotations"])
    assert legacy["text"].endswith("[1]")
    for flat, marked in zip(native["annotations"], legacy["annotations"], strict=True):
        claim = native["text"][flat["start_index"] : flat["end_index"]]
        assert legacy["text"][marked["start_index"] : marked["end_index"]] == claim
        assert marked["index"] == marked["end_index"]


def test_the_appendix_follows_the_answer_and_moves_no_offset(client: openai.OpenAI) -> None:
    native = message_part(ask(client))
    both = message_part(ask(client, metadata={**LEGACY, **APPENDIX}))
    assert both["text"] == (
        MEMBERSHIP_ANSWER + "[1]\n\nSources:\n[1] bike-coop-handbook.md (§ Membership)"
    )
    appended = message_part(ask(client, metadata=APPENDIX))
    assert (
        appended["text"]
        == native["text"] + "\n\nSources:\n[1] bike-coop-handbook.md (§ Membership)"
    )
    assert appended["annotations"] == native["annotations"]


def test_a_hidden_agent_shows_no_source_at_all(client: openai.OpenAI) -> None:
    response = ask(
        client, model="citewell-hidden", include=RESULTS, metadata={**LEGACY, **APPENDIX}
    )
    assert response["metadata"]["grounded_sources_state"] == "hidden"
    assert response["output"][0]["results"] is None
    part = message_part(response)
    assert (part["text"], part["annotations"]) == (MEMBERSHIP_ANSWER, [])


def test_an_unanswered_question_is_declined_without_sources(client: openai.OpenAI) -> None:
    response = ask(client, UNANSWERED, metadata={**LEGACY, **APPENDIX})
    assert response["metadata"]["grounded_sources_state"] == "missing"
    part = message_part(response)
    assert (part["text"], part["annotations"]) == (REFUSAL, [])


def test_tool_choice_none_looks_nothing_up(client: openai.OpenAI) -> None:
    response = ask(client, tool_choice="none")
    assert response["metadata"]["grounded_sources_state"] == "none"
    assert [item["type"] for item in response["output"]] == ["message"]
    assert message_part(response)["annotations"] == []


def test_the_file_search_tool_names_the_buckets(client: openai.OpenAI) -> None:
    tool = {"type": "file_search", "vector_store_ids": ["coop"], "max_num_results": 3}
    response = ask(client, tools=[tool], include=RESULTS)
    assert response["tools"] == [
        {**tool, "filters": None, "ranking_options": {"ranker": "auto", "score_threshold": 0.0}}
    ]
    assert len(response["output"][0]["results"]) <= 3
    with pytest.raises(openai.NotFoundError):
        client.responses.create(
            model="citewell-agent",
            input=MEMBERSHIP,
            tools=[{"type": "file_search", "vector_store_ids": ["nope"]}],
        )


def test_a_stored_response_reads_back_the_same(client: openai.OpenAI) -> None:
    response = ask(client, include=RESULTS, metadata=LEGACY)
    assert plain(client.responses.retrieve(response["id"])) == response
    follow_up = ask(client, "And for students?", previous_response_id=response["id"])
    assert follow_up["previous_response_id"] == response["id"]
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_unknown")
    with pytest.raises(openai.BadRequestError) as caught:
        ask(client, previous_response_id="resp_unknown")
    assert caught.value.code == "previous_response_not_found"


# -- Responses, streamed ---------------------------------------------------------------------------
TEXT_EVENTS = ("response.output_text.delta", "response.output_text.annotation.added")


def streamed(client: openai.OpenAI, question: str, **options: Any) -> list[dict[str, Any]]:
    options.setdefault("model", "citewell-agent")
    with client.responses.create(input=question, stream=True, **options) as stream:
        return [plain(event) for event in stream]


def check_stream(events: list[dict[str, Any]], *, search: bool = True) -> dict[str, Any]:
    """The event sequence of wire-formats A.7.2, exactly; returns the final response."""
    types = [e["type"] for e in events]
    head = ["response.created", "response.in_progress"]
    if search:
        head += [
            "response.output_item.added",
            "response.file_search_call.in_progress",
            "response.file_search_call.searching",
            "response.file_search_call.completed",
            "response.output_item.done",
        ]
    head += ["response.output_item.added", "response.content_part.added"]
    tail = [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert types[: len(head)] == head and types[-len(tail) :] == tail
    middle = types[len(head) : -len(tail)]
    assert middle and set(middle) <= set(TEXT_EVENTS)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    final: dict[str, Any] = events[-1]["response"]
    part = message_part(final)
    text, annotations = "", []
    for event in events[len(head) : -len(tail)]:
        assert (event["output_index"], event["content_index"]) == (int(search), 0)
        if event["type"] == "response.output_text.delta":
            text += event["delta"]
        else:
            annotation = event["annotation"]
            assert event["annotation_index"] == len(annotations)
            # Right after the deltas of its sentence: the text so far ends with the claim (and,
            # in legacy mode, its marker), and no delta of a later sentence came first.
            assert annotation["end_index"] <= len(text)
            assert text[annotation["end_index"] :] in ("", f"[{annotation['source_index']}]")
            annotations.append(annotation)
    assert text == part["text"] == events[-4]["text"]
    assert annotations == part["annotations"] == events[-3]["part"]["annotations"]
    assert events[-2]["item"] == final["output"][-1]
    return final


def test_a_stream_sends_every_event_in_order(client: openai.OpenAI) -> None:
    events = streamed(client, MACWRITE, include=RESULTS)
    final = check_stream(events)
    assert final["metadata"]["grounded_sources_state"] == "available"
    [annotation] = message_part(final)["annotations"]
    assert final["output"][0]["results"][0]["attributes"]["source_index"] == 1
    assert events[6]["item"]["queries"] == [MACWRITE]
    assert plain(client.responses.retrieve(final["id"])) == final
    assert annotation["file_id"] == events[6]["item"]["results"][0]["file_id"]


@pytest.mark.parametrize(
    "metadata",
    [{}, LEGACY, APPENDIX, {**LEGACY, **APPENDIX}],
    ids=["native", "legacy", "appendix", "both"],
)
def test_a_stream_adds_up_to_the_whole_answer(
    client: openai.OpenAI, metadata: dict[str, str]
) -> None:
    final = check_stream(streamed(client, MEMBERSHIP, metadata=metadata))
    whole = ask(client, metadata=metadata)
    assert message_part(final) == message_part(whole)
    assert (
        final["metadata"]
        == whole["metadata"]
        == {**metadata, "grounded_sources_state": "available"}
    )


@pytest.mark.parametrize(
    ("model", "question", "options", "state"),
    [
        ("citewell-hidden", MEMBERSHIP, {}, "hidden"),
        ("citewell-agent", UNANSWERED, {}, "missing"),
        ("citewell-agent", MEMBERSHIP, {"tool_choice": "none"}, "none"),
    ],
)
def test_a_stream_in_every_grounding_state(
    client: openai.OpenAI, model: str, question: str, options: dict[str, Any], state: str
) -> None:
    metadata = {**LEGACY, **APPENDIX}
    events = streamed(client, question, model=model, metadata=metadata, include=RESULTS, **options)
    final = check_stream(events, search=state != "none")
    assert final["metadata"]["grounded_sources_state"] == state
    assert "response.output_text.annotation.added" not in {e["type"] for e in events}
    assert "[1]" not in message_part(final)["text"]
    if state == "hidden":
        assert final["output"][0]["results"] is None
    elif state == "missing":
        assert isinstance(final["output"][0]["results"], list)


def test_the_stream_helper_gives_the_final_response(client: openai.OpenAI) -> None:
    with client.responses.stream(
        model="citewell-agent", input=MEMBERSHIP, metadata=LEGACY, include=RESULTS
    ) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert final.output_text == "".join(deltas) == MEMBERSHIP_ANSWER + "[1]"
    data = plain(final)  # a ParsedResponse: it adds `parsed` fields of its own
    stored = plain(client.responses.retrieve(final.id))
    assert (stored["id"], stored["metadata"], stored["usage"]) == (
        data["id"],
        data["metadata"],
        data["usage"],
    )
    part = message_part(stored)
    assert {**part, "parsed": None} == {**message_part(data), "parsed": None}
    assert part["annotations"][0]["index"] == len(MEMBERSHIP_ANSWER)


# -- Chat Completions ------------------------------------------------------------------------------
def chat(client: openai.OpenAI, question: str = MEMBERSHIP, **options: Any) -> dict[str, Any]:
    options.setdefault("model", "citewell-agent")
    completion = client.chat.completions.create(
        messages=[
            {"role": "system", "content": "Answer from the handbook."},
            {"role": "user", "content": question},
        ],
        **options,
    )
    data: dict[str, Any] = plain(completion)
    return data


def test_chat_cites_with_url_citations_and_lists_the_sources(
    client: openai.OpenAI, server: str
) -> None:
    completion = chat(client)
    message = completion["choices"][0]["message"]
    assert message["content"] == (
        MEMBERSHIP_ANSWER + "\n\nSources:\n[1] bike-coop-handbook.md (§ Membership)"
    )
    [annotation] = message["annotations"]
    citation = annotation["url_citation"]
    assert annotation["type"] == "url_citation"
    assert (citation["start_index"], citation["end_index"]) == (0, len(MEMBERSHIP_ANSWER))
    assert citation["title"] == "bike-coop-handbook.md" and citation["source_index"] == 1
    # A signed link that opens the cited file's original, without a key.
    assert citation["url"].startswith(f"{server}/v1/links/")
    assert httpx.get(citation["url"]).content == HANDBOOK.read_bytes()
    assert completion["metadata"] == {"grounded_sources_state": "available"}
    omitted = chat(client, metadata={"sources_appendix": "omit"})["choices"][0]["message"]
    assert omitted["content"] == MEMBERSHIP_ANSWER
    # Each reply makes its own links (expiring from when it was made); the rest is the same.
    for annotation in (*omitted["annotations"], *message["annotations"]):
        annotation["url_citation"].pop("url")
    assert omitted["annotations"] == message["annotations"]


def test_chat_legacy_markers_and_grounding_states(client: openai.OpenAI) -> None:
    legacy = chat(client, metadata={**LEGACY, "sources_appendix": "omit"})
    assert legacy["choices"][0]["message"]["content"] == MEMBERSHIP_ANSWER + "[1]"
    hidden = chat(client, model="citewell-hidden")
    assert hidden["choices"][0]["message"]["content"] == MEMBERSHIP_ANSWER
    assert hidden["choices"][0]["message"]["annotations"] == []
    assert hidden["metadata"]["grounded_sources_state"] == "hidden"
    assert chat(client, UNANSWERED)["metadata"]["grounded_sources_state"] == "missing"
    assert chat(client, tool_choice="none")["metadata"]["grounded_sources_state"] == "none"


def test_a_chat_stream_sends_all_annotations_in_one_delta(client: openai.OpenAI) -> None:
    whole = chat(client)["choices"][0]["message"]
    stream = client.chat.completions.create(
        model="citewell-agent",
        messages=[{"role": "user", "content": MEMBERSHIP}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [plain(chunk) for chunk in stream]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == whole["content"]
    carrying = [d["annotations"] for d in deltas if "annotations" in d]
    # Each reply makes its own signed links (expiring from when it was made); the rest is equal.
    for annotation in [*whole["annotations"], *(a for c in carrying for a in c)]:
        annotation["url_citation"].pop("url")
    assert carrying == [whole["annotations"]]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0


def test_the_chat_stream_helper_does_not_crash(client: openai.OpenAI) -> None:
    with client.chat.completions.stream(
        model="citewell-agent", messages=[{"role": "user", "content": MEMBERSHIP}]
    ) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    message = final.choices[0].message
    [annotation] = message.annotations or []
    assert annotation.url_citation.end_index == len(MEMBERSHIP_ANSWER)
    assert message.content == chat(client)["choices"][0]["message"]["content"]


# -- cited ranges ----------------------------------------------------------------------------------
def test_every_annotation_names_the_exact_range_of_the_source_it_cites(
    client: openai.OpenAI, server: str
) -> None:
    """Responses (whole and streamed) and Chat (whole and streamed): for every annotation,
    ``GET /v1/sources/{file_id}/text`` sliced [cited_start_index:cited_end_index] is cited_text."""
    annotations: list[dict[str, Any]] = []
    for question in (MEMBERSHIP, MACWRITE):
        for metadata in ({}, LEGACY):
            annotations += message_part(ask(client, question, metadata=metadata))["annotations"]
        events = streamed(client, question)
        annotations += [plain(e["annotation"]) for e in events if "annotation" in e]
        annotations += chat(client, question)["choices"][0]["message"]["annotations"]
        stream = client.chat.completions.create(
            model="citewell-agent", messages=[{"role": "user", "content": question}], stream=True
        )
        for chunk in stream:
            delta = plain(chunk)["choices"][0]["delta"] if chunk.choices else {}
            annotations += delta.get("annotations", [])
    assert len(annotations) == 2 * 5  # one citation in each of five answers per question
    check_cited_ranges(server, annotations)
    pdf = [a for a in annotations if a.get("filename") == "multi_page.pdf"]
    assert pdf and all(isinstance(a["page_number"], int) and a["page_number"] > 0 for a in pdf)
    # The SDK's own objects keep the fields (pydantic extras), typed access included.
    response = client.responses.create(model="citewell-agent", input=MACWRITE)
    [typed] = [
        a
        for item in response.output
        if item.type == "message"
        for part in item.content
        if part.type == "output_text"
        for a in part.annotations
    ]
    assert typed.model_extra is not None and set(CITED) <= set(typed.model_extra)
    with client.chat.completions.stream(
        model="citewell-agent", messages=[{"role": "user", "content": MACWRITE}]
    ) as chat_stream:
        final = chat_stream.get_final_completion()
    [nested] = final.choices[0].message.annotations or []
    extra = nested.url_citation.model_extra or {}
    assert extra["cited_text"] == typed.model_extra["cited_text"]


# -- errors ----------------------------------------------------------------------------------------
def test_an_unknown_model_is_not_found(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="gpt-nope", input=MEMBERSHIP)
    assert (caught.value.code, caught.value.param) == ("model_not_found", "model")
    with pytest.raises(openai.NotFoundError) as caught:
        chat(client, model="gpt-nope")
    assert caught.value.code == "model_not_found"


@pytest.mark.parametrize(
    ("options", "param"),
    [
        ({"metadata": {"citation_compat": "fancy"}}, "metadata.citation_compat"),
        ({"metadata": {"sources_appendix": "always"}}, "metadata.sources_appendix"),
        ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
        ({"extra_body": {"input": 42}}, "input"),
        ({"extra_body": {"input": [{"role": "user", "content": [{"type": "input_image"}]}]}}, None),
        ({"extra_body": {"input": [{"role": "assistant", "content": "hi"}]}}, "input"),
        ({"tools": [{"type": "web_search"}]}, None),
        ({"extra_body": {"frobnicate": True}}, "frobnicate"),
        ({"temperature": 7}, "temperature"),
    ],
)
def test_bad_requests_are_refused_in_openai_shape(
    client: openai.OpenAI, options: dict[str, Any], param: str | None
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="citewell-agent", input=MEMBERSHIP, **options)
    assert caught.value.type == "invalid_request_error"
    if param is not None:
        assert caught.value.param == param


def test_hostile_bodies_are_refused_and_the_server_keeps_serving(
    client: openai.OpenAI, server: str
) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        client.responses.create(model="citewell-agent", input="x" * 2_000_000)
    assert caught.value.status_code == 413
    nested: dict[str, Any] = {"type": "eq", "key": "a", "value": "b"}
    for _ in range(40):
        nested = {"type": "and", "filters": [nested]}
    tool = {"type": "file_search", "vector_store_ids": ["coop"], "filters": nested}
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="citewell-agent", input=MEMBERSHIP, tools=[tool])  # type: ignore[list-item]
    raw = httpx.post(
        f"{server}/v1/chat/completions",
        content=b'{"messages": [',
        headers={"content-type": "application/json"},
        timeout=10,
    )
    assert raw.status_code == 400 and raw.json()["error"]["code"] == "invalid_json"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="citewell-agent", messages=[])
    assert message_part(ask(client))["text"] == MEMBERSHIP_ANSWER


def test_a_failing_generator_is_a_502_or_504(client: openai.OpenAI) -> None:
    with pytest.raises(openai.InternalServerError) as caught:
        client.responses.create(model="citewell-broken", input=MEMBERSHIP)
    assert caught.value.status_code == 502
    assert caught.value.code == "generator_unavailable"
    assert "refused" in caught.value.message
    with pytest.raises(openai.InternalServerError) as caught:
        chat(client, model="citewell-slow")
    assert caught.value.status_code == 504


def test_a_generator_failing_mid_stream_ends_it_with_response_failed(
    client: openai.OpenAI,
) -> None:
    events = streamed(client, MEMBERSHIP, model="citewell-broken")
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[-2]["type"] == "response.output_text.delta"
    failed = events[-1]
    assert failed["type"] == "response.failed"
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"]["code"] == "server_error"
    assert "refused" in failed["response"]["error"]["message"]
    with pytest.raises(openai.APIError, match="refused"):
        for _ in client.chat.completions.create(
            model="citewell-broken", messages=[{"role": "user", "content": MEMBERSHIP}], stream=True
        ):
            pass
