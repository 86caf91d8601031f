"""The OpenAI Responses dialect: an ``Answer`` as a ``response`` object, or as its SSE stream.

    render_response(answer, options) -> dict                       # POST /v1/responses
    ResponseStream(options).feed(event) -> list[str]               # ... with stream: true

Output: a ``file_search_call`` item (unless nothing was looked up) whose ``results`` (only when
asked for with ``include: ["file_search_call.results"]``, else ``null``) are the retrieved
passages, each with its source's ``access_url`` (a signed link: ``AnswerOptions.access_url``),
then one ``message`` whose ``output_text`` carries one ``file_citation`` per citation: OpenAI's
``file_id``, ``filename`` and ``index`` (the end of the cited claim: where a marker belongs)
plus citewell's ``start_index``/``end_index`` (the claim), ``source_index`` (the number of the
source in this answer, from 1) and the cited range of the source: ``cited_text``,
``cited_start_index``/``cited_end_index`` (code points into the source's canonical text,
``GET /v1/sources/{file_id}/text``), ``chunk_id``, ``page_number``, ``page_label``,
``support`` (the verifier's score) and ``regions`` (the range's boxes on each page, with links
to pictures of the page: ``common.cited_regions``), and ``conflict_side`` (the side of a
disagreement between sources the range states, or null). A result of a source with pages has
``preview``, a link to a picture of the page with its best sentence tinted, and ``media_id``,
a link to the plain picture of that page.

The stream follows wire-formats A.7.2 event by event; ``response.completed`` carries exactly what
``render_response`` returns for the same answer (the SDK's ``get_final_response()`` reads only
that event). One difference is unavoidable: the search item's results go out before the answer
exists, so there they carry no ``source_index``; the final response's results do.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from citewell.events import AnswerEvent, ClaimDone, Completed, Retrieved, TextDelta
from citewell.model import Answer, ConflictSide, Passage, Source, conflict_sides
from citewell.render.common import (
    Anchor,
    AnswerOptions,
    Ids,
    TextBuilder,
    appendix_text,
    cited_range,
    dumps,
    layout,
    passage_label,
    passage_pictures,
    shows_sources,
    token_usage,
    unsupported_claims,
)

__all__ = [
    "RESULTS",
    "ResponseOptions",
    "ResponseStream",
    "render_response",
    "render_response_stream",
]

RESULTS = "file_search_call.results"
"""The ``include`` value that asks for the search results."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseOptions(AnswerOptions):
    """What a ``POST /v1/responses`` asked, as far as the rendering goes (echoed back)."""

    tools: tuple[dict[str, Any], ...] = ()
    """The request's tools, normalised as OpenAI echoes them."""
    tool_choice: str | dict[str, Any] = "auto"
    include: tuple[str, ...] = ()
    metadata: dict[str, str] | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    max_output_tokens: int | None = None
    parallel_tool_calls: bool = True
    previous_response_id: str | None = None
    store: bool = True
    user: str | None = None

    @property
    def include_results(self) -> bool:
        return RESULTS in self.include and self.show_sources


def render_response(answer: Answer, options: ResponseOptions) -> dict[str, Any]:
    """The complete ``response`` object of an answer."""
    ids = Ids(options.id)
    rendered = layout(answer, options)
    sources = {s.source.id: s.source for s in answer.sources}
    output: list[dict[str, Any]] = []
    if options.retrieve:
        output.append(_search_item(ids, answer.question, _results(answer, options)))
    annotations = [_annotation(a, sources[a.citation.source_id], options) for a in rendered.anchors]
    message = _message(ids, rendered.text, annotations, status="completed")
    if rendered.unsupported is not None:
        message["content"][0]["unsupported_claims"] = unsupported_claims(rendered)
    output.append(message)
    read, written = token_usage(answer, options, rendered.text)
    response = _response(
        ids,
        options,
        status="completed",
        output=output,
        usage={
            "input_tokens": read,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": written,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": read + written,
        },
    )
    response["completed_at"] = max(options.created_at, int(answer.created_at.timestamp()))
    response["metadata"]["grounded_sources_state"] = answer.grounding.value
    return response


def render_response_stream(
    events: Iterable[AnswerEvent], options: ResponseOptions
) -> Iterator[str]:
    """The SSE stream of an answer's events, from ``response.created`` to ``response.completed``."""
    stream = ResponseStream(options)
    for event in events:
        yield from stream.feed(event)


class ResponseStream:
    """Turns engine events into SSE messages, one event at a time (the HTTP handler is async).

    ``response`` holds the final object once the stream has ended: the completed response, or
    the failed one.
    """

    def __init__(self, options: ResponseOptions) -> None:
        self._options = options
        self._ids = Ids(options.id)
        self._text = TextBuilder(
            legacy=options.citation_compat == "legacy", show_sources=options.show_sources
        )
        self._sources: dict[str, Source] = {}
        self._sequence = 0
        self._started = False
        self._message_open = False
        self._message_index = 1 if options.retrieve else 0
        self._annotations = 0
        self.response: dict[str, Any] | None = None

    def feed(self, event: AnswerEvent) -> list[str]:
        out = self._start()
        if isinstance(event, Retrieved):
            out += self._retrieved(event)
        elif isinstance(event, TextDelta):
            out += self._delta(self._text.add(event.text))
        elif isinstance(event, ClaimDone):
            self._sources.update((s.source.id, s.source) for s in event.result.new_sources)
            piece, anchors = self._text.claim(event.result.claim.span, event.result.citations)
            out += self._delta(piece)
            out += [self._annotation_added(a) for a in anchors]
        elif isinstance(event, Completed):
            out += self._completed(event.answer)
        return out

    def fail(self, message: str, *, overloaded: bool = False) -> list[str]:
        """``response.failed``: the answer broke off after the stream began (OpenAI's streams
        name one kind of failure, so ``overloaded`` changes nothing)."""
        out = self._start()
        response = self._snapshot(status="failed")
        response["error"] = {"code": "server_error", "message": message}
        self.response = response
        return [*out, self._event("response.failed", response=response)]

    # -- the parts of the sequence ---------------------------------------------------------------
    def _start(self) -> list[str]:
        if self._started:
            return []
        self._started = True
        return [
            self._event("response.created", response=self._snapshot()),
            self._event("response.in_progress", response=self._snapshot()),
        ]

    def _retrieved(self, event: Retrieved) -> list[str]:
        out = []
        if self._options.retrieve:
            at = {"item_id": self._ids.of("fs"), "output_index": 0}
            results = None
            if self._options.include_results:
                # Which sources the answer will cite is not known yet: no source_index here.
                sides = conflict_sides(event.conflicts)
                results = [
                    _result(p, None, sides.get(p.chunk.id), self._options) for p in event.passages
                ]
            out += [
                self._event(
                    "response.output_item.added",
                    output_index=0,
                    item=_search_item(self._ids, "", None, status="in_progress"),
                ),
                self._event("response.file_search_call.in_progress", **at),
                self._event("response.file_search_call.searching", **at),
                self._event("response.file_search_call.completed", **at),
                self._event(
                    "response.output_item.done",
                    output_index=0,
                    item=_search_item(self._ids, event.query, results),
                ),
            ]
        return out + self._open_message()

    def _open_message(self) -> list[str]:
        if self._message_open:
            return []
        self._message_open = True
        empty_part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        return [
            self._event(
                "response.output_item.added",
                output_index=self._message_index,
                item=_message(self._ids, None, [], status="in_progress"),
            ),
            self._event("response.content_part.added", **self._part(), part=empty_part),
        ]

    def _delta(self, piece: str) -> list[str]:
        if not piece:
            return []
        return [
            *self._open_message(),
            self._event("response.output_text.delta", **self._part(), delta=piece, logprobs=[]),
        ]

    def _annotation_added(self, anchor: Anchor) -> str:
        index = self._annotations
        self._annotations += 1
        return self._event(
            "response.output_text.annotation.added",
            **self._part(),
            annotation_index=index,
            annotation=_annotation(anchor, self._sources[anchor.citation.source_id], self._options),
        )

    def _completed(self, answer: Answer) -> list[str]:
        final = render_response(answer, self._options)
        out = self._open_message() + self._delta(
            self._text.finish(appendix_text(answer, self._options))
        )
        message = final["output"][-1]
        part = message["content"][0]
        if self._text.text != part["text"]:
            raise RuntimeError("the streamed text differs from the final text")
        self.response = final
        return [
            *out,
            self._event(
                "response.output_text.done", **self._part(), text=part["text"], logprobs=[]
            ),
            self._event("response.content_part.done", **self._part(), part=part),
            self._event(
                "response.output_item.done", output_index=self._message_index, item=message
            ),
            self._event("response.completed", response=final),
        ]

    # -- helpers ---------------------------------------------------------------------------------
    def _part(self) -> dict[str, Any]:
        return {
            "item_id": self._ids.of("msg"),
            "output_index": self._message_index,
            "content_index": 0,
        }

    def _snapshot(self, *, status: str = "in_progress") -> dict[str, Any]:
        return _response(self._ids, self._options, status=status, output=[], usage=None)

    def _event(self, type_: str, **fields: Any) -> str:
        data = {"type": type_, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return f"event: {type_}\ndata: {dumps(data)}\n\n"


def _response(
    ids: Ids,
    options: ResponseOptions,
    *,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "id": ids.of("resp"),
        "object": "response",
        "created_at": options.created_at,
        "status": status,
        "completed_at": None,
        "error": None,
        "incomplete_details": None,
        "instructions": options.instructions,
        "max_output_tokens": options.max_output_tokens,
        "model": options.model,
        "output": output,
        "parallel_tool_calls": options.parallel_tool_calls,
        "previous_response_id": options.previous_response_id,
        "reasoning": {"effort": None, "summary": None},
        "store": options.store,
        "temperature": options.temperature,
        "text": {"format": {"type": "text"}},
        "tool_choice": options.tool_choice,
        "tools": list(options.tools),
        "top_p": options.top_p,
        "truncation": "disabled",
        "usage": usage,
        "user": options.user,
        "metadata": dict(options.metadata or {}),
    }


def _search_item(
    ids: Ids, query: str, results: list[dict[str, Any]] | None, *, status: str = "completed"
) -> dict[str, Any]:
    return {
        "type": "file_search_call",
        "id": ids.of("fs"),
        "status": status,
        "queries": [query] if query else [],
        "results": results,
    }


def _message(
    ids: Ids, text: str | None, annotations: list[dict[str, Any]], *, status: str
) -> dict[str, Any]:
    content = []
    if text is not None:
        content.append(
            {"type": "output_text", "text": text, "annotations": annotations, "logprobs": []}
        )
    return {
        "type": "message",
        "id": ids.of("msg"),
        "status": status,
        "role": "assistant",
        "content": content,
    }


def _annotation(anchor: Anchor, source: Source, options: ResponseOptions) -> dict[str, Any]:
    return {
        "type": "file_citation",
        "file_id": source.id,
        "filename": source.filename,
        "index": anchor.end,
        "start_index": anchor.start,
        "end_index": anchor.end,
        "source_index": anchor.citation.source_index,
        **cited_range(anchor.citation, options.access_url),
    }


def _results(answer: Answer, options: ResponseOptions) -> list[dict[str, Any]] | None:
    # A hidden answer shows no results at all: they would name the sources it keeps back.
    if not options.include_results or not shows_sources(answer, options):
        return None
    numbers = {s.source.id: s.source_index for s in answer.sources}
    sides = answer.conflict_sides()
    return [
        _result(p, numbers.get(p.source.id), sides.get(p.chunk.id), options)
        for p in answer.passages
    ]


def _result(
    passage: Passage,
    source_index: int | None,
    conflict_side: ConflictSide | None,
    options: ResponseOptions,
) -> dict[str, Any]:
    source = passage.source
    label, locator = passage_label(passage)
    excerpt = passage.sentences[0].text if passage.sentences else passage.chunk.text
    page, highlight = passage_pictures(passage, options.access_url) or (None, None)
    attributes: dict[str, str | int | float | bool | None] = {
        "source_index": source_index,
        "label": label,
        "page_number": passage.page_number,
        "page_label": passage.page_label,
        "locator_label": locator,
        "modality": source.modality.value,
        "mime_type": source.mime_type,
        "access_url": options.access_url(source.id) if options.access_url else None,
        "text": passage.chunk.text,
        "excerpt": excerpt,
        "preview": highlight,
        "media_id": page,
        # A passage the answer states as one side of a disagreement between sources.
        "conflict": True if conflict_side else None,
        "conflict_side": conflict_side,
    }
    return {
        "file_id": source.id,
        "filename": source.filename,
        "score": passage.scores.fused,
        "text": passage.chunk.text,
        # OpenAI's attribute values are strings, numbers or booleans: absent rather than null.
        "attributes": {k: v for k, v in attributes.items() if v is not None},
    }
