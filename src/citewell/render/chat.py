"""The OpenAI Chat Completions dialect: an ``Answer`` as a ``chat.completion``, or as chunks.

    render_completion(answer, options) -> dict                  # POST /v1/chat/completions
    ChatStream(options).feed(event) -> list[str]                # ... with stream: true

Chat has one annotation type, ``url_citation``, nested as OpenAI nests it:
``{"type": "url_citation", "url_citation": {start_index, end_index, url, title}}`` — here with
citewell's ``source_index``, ``file_id`` and the cited range of the source added inside
(``cited_text``, ``cited_start_index``/``cited_end_index`` into the canonical text of
``GET /v1/sources/{file_id}/text``, ``chunk_id``, ``page_number``, ``page_label``,
``support``, ``regions``, ``conflict_side``), as the Responses dialect has them. ``url``
opens the source's original file on this server (a signed link: ``ChatOptions.access_url``);
``title`` is its file name. Chat clients mostly show ``content`` alone, so the "Sources:"
appendix is included by default.

Streaming sends ``data:`` lines only: text deltas as the answer grows, then every annotation in
ONE delta (the SDK's ``chat.completions.stream()`` crashes on a second one) with the message's
``unsupported_claims``, the finish chunk, the usage chunk when asked for, and ``data: [DONE]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from citewell.events import AnswerEvent, ClaimDone, Completed, TextDelta
from citewell.model import Answer
from citewell.render.common import (
    AccessUrl,
    AnswerOptions,
    Ids,
    SourcesAppendix,
    TextBuilder,
    appendix_text,
    cited_range,
    dumps,
    layout,
    token_usage,
    unsupported_claims,
)

__all__ = ["DONE", "ChatOptions", "ChatStream", "render_completion", "render_completion_stream"]

DONE = "data: [DONE]\n\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatOptions(AnswerOptions):
    """What a ``POST /v1/chat/completions`` asked, as far as the rendering goes."""

    sources_appendix: SourcesAppendix = "include"
    """Chat clients mostly show ``content`` alone: the sources are listed in it by default."""
    access_url: AccessUrl
    """How a citation's ``url`` is made (every citation has one)."""
    include_usage: bool = False
    """``stream_options.include_usage``: a last chunk with the token counts."""
    metadata: dict[str, str] | None = None


def render_completion(answer: Answer, options: ChatOptions) -> dict[str, Any]:
    """The complete ``chat.completion`` object of an answer."""
    rendered = layout(answer, options)
    sources = {s.source.id: s.source for s in answer.sources}
    annotations = [
        {
            "type": "url_citation",
            "url_citation": {
                "start_index": anchor.start,
                "end_index": anchor.end,
                "url": options.access_url(anchor.citation.source_id),
                "title": sources[anchor.citation.source_id].filename,
                "source_index": anchor.citation.source_index,
                "file_id": anchor.citation.source_id,
                **cited_range(anchor.citation, options.access_url),
            },
        }
        for anchor in rendered.anchors
    ]
    message: dict[str, Any] = {
        "role": "assistant",
        "content": rendered.text,
        "refusal": None,
        "annotations": annotations,
    }
    if rendered.unsupported is not None:
        message["unsupported_claims"] = unsupported_claims(rendered)
    read, written = token_usage(answer, options, rendered.text)
    return {
        **_envelope(options, "chat.completion"),
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None, "message": message}],
        "usage": {
            "prompt_tokens": read,
            "completion_tokens": written,
            "total_tokens": read + written,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
        "metadata": {**(options.metadata or {}), "grounded_sources_state": answer.grounding.value},
    }


def render_completion_stream(events: Iterable[AnswerEvent], options: ChatOptions) -> Iterator[str]:
    """The SSE lines of an answer's events, from the role chunk to ``data: [DONE]``."""
    stream = ChatStream(options)
    for event in events:
        yield from stream.feed(event)


class ChatStream:
    """Turns engine events into ``chat.completion.chunk`` lines, one event at a time."""

    def __init__(self, options: ChatOptions) -> None:
        self._options = options
        self._envelope = _envelope(options, "chat.completion.chunk")
        self._text = TextBuilder(
            legacy=options.citation_compat == "legacy", show_sources=options.show_sources
        )
        self._started = False

    def feed(self, event: AnswerEvent) -> list[str]:
        out = self._start()
        if isinstance(event, TextDelta):
            out += self._content(self._text.add(event.text))
        elif isinstance(event, ClaimDone):
            piece, _ = self._text.claim(event.result.claim.span, event.result.citations)
            out += self._content(piece)
        elif isinstance(event, Completed):
            out += self._completed(event.answer)
        return out

    def fail(self, message: str, *, overloaded: bool = False) -> list[str]:
        """A chunk with a top-level ``error``: the OpenAI SDK raises ``APIError`` on it (one
        kind of failure, so ``overloaded`` changes nothing)."""
        error = {"message": message, "type": "server_error", "param": None, "code": None}
        return [*self._start(), f"data: {dumps({'error': error})}\n\n"]

    def _start(self) -> list[str]:
        if self._started:
            return []
        self._started = True
        return [self._chunk({"role": "assistant", "content": "", "refusal": None})]

    def _content(self, piece: str) -> list[str]:
        return [self._chunk({"content": piece})] if piece else []

    def _completed(self, answer: Answer) -> list[str]:
        final = render_completion(answer, self._options)
        out = self._content(self._text.finish(appendix_text(answer, self._options)))
        message = final["choices"][0]["message"]
        if self._text.text != message["content"]:
            raise RuntimeError("the streamed text differs from the final text")
        if message["annotations"] or "unsupported_claims" in message:
            grounding = ("annotations", "unsupported_claims")
            out.append(self._chunk({k: message[k] for k in grounding if k in message}))
        out.append(self._chunk({}, finish_reason="stop", metadata=final["metadata"]))
        if self._options.include_usage:
            out.append(self._line({**self._envelope, "choices": [], "usage": final["usage"]}))
        return [*out, DONE]

    def _chunk(
        self, delta: dict[str, Any], *, finish_reason: str | None = None, **extra: Any
    ) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        chunk = {**self._envelope, "choices": [choice], **extra}
        if self._options.include_usage:
            chunk["usage"] = None
        return self._line(chunk)

    @staticmethod
    def _line(data: dict[str, Any]) -> str:
        return f"data: {dumps(data)}\n\n"


def _envelope(options: ChatOptions, object_: str) -> dict[str, Any]:
    return {
        "id": Ids(options.id).of("chatcmpl-"),
        "object": object_,
        "created": options.created_at,
        "model": options.model,
        "system_fingerprint": None,
    }
