"""The Anthropic Messages dialect: an ``Answer`` as a ``message``, or as its SSE stream.

    render_message(answer, options) -> dict                       # POST /v1/messages
    MessageStream(options).feed(event) -> list[str]               # ... with stream: true

The answer's text is cut into ``text`` blocks: each claim with citations to show is a block of
its own carrying them; the text between such claims (uncited claims, spaces, a refusal) goes in
plain blocks without ``citations``. The blocks' texts concatenate to exactly the answer's text.
A claim the sources do not support (kept, uncited, by a non-strict agent) is a block of its own
flagged ``"unsupported": true`` when sources are shown: the flag stays on the block in the SDK's
stream accumulator, where a field on the message would be lost.

A citation is named by the ``Citable`` of the chunk it cites (``citewell.documents``): a
request's own documents as ``char_location`` / ``page_location`` / ``content_block_location`` /
``search_result_location``; passages citewell retrieved as ``search_result_location`` whose
``source`` is a signed link to the source's original on this server (``access_url``), ``title``
its file name, ``search_result_index`` the passage's rank among those retrieved and whose block
indices count the sentences of the passage's chunk. ``cited_text`` is always exactly the cited
range of the source's text. A citation of a retrieved source with character boxes (a PDF, a
scan, an image) also carries citewell's ``regions``, as the OpenAI dialects do
(``common.cited_regions``); the others are exactly Anthropic's.

The stream follows wire-formats C.5: a claim's block goes out whole once the claim is settled
(text, then its citations as ``citations_delta``), plain text as soon as it is known to be plain.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from citewell.events import AnswerEvent, Citable, ClaimDone, Completed, Retrieved, TextDelta
from citewell.locator import block_range, page_at
from citewell.model import Answer, Citation, Claim, Passage
from citewell.render.common import (
    AccessUrl,
    AnswerOptions,
    Ids,
    citations_by_claim,
    cited_regions,
    count_tokens,
    dumps,
    shows_sources,
)

__all__ = [
    "MessageOptions",
    "MessageStream",
    "anthropic_error",
    "render_message",
    "render_message_stream",
    "retrieved_citables",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageOptions(AnswerOptions):
    """What a ``POST /v1/messages`` asked, as far as the rendering goes."""

    citables: Mapping[str, Citable] = field(default_factory=dict)
    """How the request's own documents are cited, by chunk id; empty when citewell retrieves."""
    access_url: AccessUrl
    """How a retrieved source's ``source`` URL is made."""
    request_id: str | None = None


def retrieved_citables(passages: Sequence[Passage], access_url: AccessUrl) -> dict[str, Citable]:
    """Retrieved passages as search results, by chunk id."""
    return {
        p.chunk.id: Citable(
            kind="search_result_location",
            index=index,
            title=p.source.filename,
            source=access_url(p.source.id),
            units=p.chunk.sentences,
        )
        for index, p in enumerate(passages)
    }


def location(citation: Citation, citable: Citable, links: AccessUrl) -> dict[str, Any]:
    """One citation as Anthropic's ``TextCitation``; one into a stored source with boxes also
    has ``regions`` (a request's own documents are not stored: no link opens their pages), and
    one stating a side of a disagreement between sources, ``conflict_side``."""
    wire = _anthropic_location(citation, citable)
    if citation.regions and citable.kind == "search_result_location":
        wire["regions"] = cited_regions(citation, links)
    if citation.conflict_side:
        wire["conflict_side"] = citation.conflict_side
    return wire


def _anthropic_location(citation: Citation, citable: Citable) -> dict[str, Any]:
    span = citation.span
    if citable.kind == "search_result_location":
        start, end = block_range(citable.units, span)
        return {
            "type": "search_result_location",
            "cited_text": citation.cited_text,
            "search_result_index": citable.index,
            "source": citable.source,
            "title": citable.title,
            "start_block_index": start,
            "end_block_index": end,
        }
    wire: dict[str, Any] = {
        "type": citable.kind,
        "cited_text": citation.cited_text,
        "document_index": citable.index,
        "document_title": citable.title,
    }
    if citable.kind == "char_location":
        wire |= {"start_char_index": span.start, "end_char_index": span.end}
    elif citable.kind == "page_location":
        first = page_at(citable.pages, span.start)
        last = page_at(citable.pages, max(span.start, span.end - 1))
        start_page = first.number if first else 1
        end_page = last.number if last else start_page
        wire |= {"start_page_number": start_page, "end_page_number": max(end_page, start_page) + 1}
    else:
        start, end = block_range(citable.units, span)
        wire |= {"start_block_index": start, "end_block_index": end}
    if citable.file_id is not None:
        wire["file_id"] = citable.file_id
    return wire


@dataclass(frozen=True, slots=True)
class _Piece:
    """Rendered text: plain (no citations), one cited claim with its citations, or one claim
    flagged as unsupported."""

    text: str
    citations: tuple[dict[str, Any], ...] | None = None
    unsupported: bool = False

    @property
    def plain(self) -> bool:
        return self.citations is None and not self.unsupported


class _Blocks:
    """Cuts the answer's text into pieces as text and claims arrive (engine order)."""

    def __init__(
        self, *, show_sources: bool, citables: Mapping[str, Citable], links: AccessUrl
    ) -> None:
        self.show = show_sources
        self.citables: dict[str, Citable] = dict(citables)
        self._links = links
        self._text = ""
        self._done = 0

    def add(self, text: str) -> list[_Piece]:
        self._text += text
        # Nothing can be cited: no need to wait for claims.
        return [] if self.show else self._plain(len(self._text))

    def claim(self, claim: Claim, citations: Sequence[Citation]) -> list[_Piece]:
        span = claim.span
        shown = [
            location(c, citable, self._links)
            for c in citations
            if (citable := self.citables.get(c.chunk_id)) is not None and citable.cite
        ]
        unsupported = claim.needs_citation and not claim.supported
        if not self.show or not (shown or unsupported) or span.start < self._done:
            return self._plain(span.end)
        pieces = self._plain(span.start)
        text = self._text[span.start : span.end]
        pieces.append(_Piece(text, tuple(shown)) if shown else _Piece(text, unsupported=True))
        self._done = span.end
        return pieces

    def finish(self) -> list[_Piece]:
        return self._plain(len(self._text))

    def _plain(self, end: int) -> list[_Piece]:
        if end <= self._done:
            return []
        piece = _Piece(self._text[self._done : end])
        self._done = end
        return [piece]


def _pieces(answer: Answer, options: MessageOptions) -> list[_Piece]:
    blocks = _Blocks(
        show_sources=shows_sources(answer, options),
        citables=_citables(answer, options),
        links=options.access_url,
    )
    pieces = blocks.add(answer.text)
    grouped = citations_by_claim(answer)
    for index, claim in enumerate(answer.claims):
        pieces += blocks.claim(claim, grouped.get(index, ()))
    return pieces + blocks.finish()


def _citables(answer: Answer, options: MessageOptions) -> Mapping[str, Citable]:
    return options.citables or retrieved_citables(answer.passages, options.access_url)


def _content(pieces: Iterable[_Piece]) -> list[dict[str, Any]]:
    """Pieces as ``text`` blocks: consecutive plain pieces share one block."""
    content: list[dict[str, Any]] = []
    for piece in pieces:
        if piece.plain and content and content[-1].keys() == {"type", "text"}:
            content[-1]["text"] += piece.text
        else:
            content.append({**_block(piece), "text": piece.text})
    return content


def _block(piece: _Piece) -> dict[str, Any]:
    """The ``text`` block of a piece, its text still empty (as a stream's block starts)."""
    if piece.citations is not None:
        return {"type": "text", "text": "", "citations": list(piece.citations)}
    if piece.unsupported:
        return {"type": "text", "text": "", "unsupported": True}
    return {"type": "text", "text": ""}


def _input_tokens(question: str, options: MessageOptions, passages: Sequence[Passage]) -> int:
    """The question, instructions and evidence read (citewell runs no tokenizer)."""
    read = count_tokens(question) + count_tokens(options.instructions)
    return read + sum(count_tokens(p.chunk.text) for p in passages)


def render_message(answer: Answer, options: MessageOptions) -> dict[str, Any]:
    """The complete ``message`` object of an answer."""
    message = _message(options, _content(_pieces(answer, options)))
    message["stop_reason"] = "end_turn"
    message["usage"] = {
        "input_tokens": _input_tokens(answer.question, options, answer.passages),
        "output_tokens": count_tokens(answer.text),
    }
    return message


def render_message_stream(events: Iterable[AnswerEvent], options: MessageOptions) -> Iterator[str]:
    """The SSE stream of an answer's events, from ``message_start`` to ``message_stop``."""
    stream = MessageStream(options)
    for event in events:
        yield from stream.feed(event)


def _message(options: MessageOptions, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": Ids(options.id).of("msg"),
        "type": "message",
        "role": "assistant",
        "model": options.model,
        "content": content,
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }


def anthropic_error(kind: str, message: str, request_id: str | None) -> dict[str, Any]:
    """Anthropic's error body (wire-formats C.6)."""
    body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    if request_id is not None:
        body["request_id"] = request_id
    return body


class MessageStream:
    """Turns engine events into SSE messages, one event at a time.

    ``message`` holds the final message once the stream has ended (what ``render_message``
    returns for the same answer).
    """

    def __init__(self, options: MessageOptions) -> None:
        self._options = options
        self._blocks = _Blocks(
            show_sources=options.show_sources, citables=options.citables, links=options.access_url
        )
        self._started = False
        self._index = -1
        self._block_open = False
        self._open_plain = False
        """Whether the open block is a plain one (more plain text joins it)."""
        self._input_tokens = 0
        self.message: dict[str, Any] | None = None

    def feed(self, event: AnswerEvent) -> list[str]:
        out: list[str] = []
        if isinstance(event, Retrieved):
            if not self._options.citables:
                self._blocks.citables = retrieved_citables(event.passages, self._options.access_url)
            self._input_tokens = _input_tokens(event.query, self._options, event.passages)
            out += self._start()
        elif isinstance(event, TextDelta):
            out += self._start() + self._send(self._blocks.add(event.text))
        elif isinstance(event, ClaimDone):
            result = event.result
            out += self._start() + self._send(self._blocks.claim(result.claim, result.citations))
        elif isinstance(event, Completed):
            out += self._start() + self._completed(event.answer)
        return out

    def fail(self, message: str, *, overloaded: bool = False) -> list[str]:
        """An ``error`` event: the answer broke off after the stream began."""
        kind = "overloaded_error" if overloaded else "api_error"
        body = anthropic_error(kind, message, self._options.request_id)
        return [*self._start(), _event("error", body)]

    def _start(self) -> list[str]:
        if self._started:
            return []
        self._started = True
        message = _message(self._options, [])
        message["usage"] = {"input_tokens": self._input_tokens, "output_tokens": 1}
        return [
            _event("message_start", {"type": "message_start", "message": message}),
            _event("ping", {"type": "ping"}),
        ]

    def _send(self, pieces: Iterable[_Piece]) -> list[str]:
        out: list[str] = []
        for piece in pieces:
            if piece.plain:
                if not piece.text:
                    continue
                if not self._open_plain:
                    out += self._close()
                    out += self._open(_block(piece))
                    self._open_plain = True
                out.append(self._delta({"type": "text_delta", "text": piece.text}))
                continue
            out += self._close()
            block = _block(piece)
            if "citations" in block:
                block["citations"] = []  # they follow the text as deltas (wire-formats C.5)
            out += self._open(block)
            out.append(self._delta({"type": "text_delta", "text": piece.text}))
            out += [
                self._delta({"type": "citations_delta", "citation": c})
                for c in piece.citations or ()
            ]
            out += self._close()
        return out

    def _open(self, block: dict[str, Any]) -> list[str]:
        self._index += 1
        self._block_open = True
        data = {"type": "content_block_start", "index": self._index, "content_block": block}
        return [_event("content_block_start", data)]

    def _delta(self, delta: dict[str, Any]) -> str:
        data = {"type": "content_block_delta", "index": self._index, "delta": delta}
        return _event("content_block_delta", data)

    def _close(self) -> list[str]:
        if not self._block_open:
            return []
        self._block_open = self._open_plain = False
        return [_event("content_block_stop", {"type": "content_block_stop", "index": self._index})]

    def _completed(self, answer: Answer) -> list[str]:
        out = self._send(self._blocks.finish()) + self._close()
        final = render_message(answer, self._options)
        self.message = final
        usage = {
            "input_tokens": self._input_tokens,
            "output_tokens": final["usage"]["output_tokens"],
        }
        delta = {"stop_reason": "end_turn", "stop_sequence": None}
        return [
            *out,
            _event("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}),
            _event("message_stop", {"type": "message_stop"}),
        ]


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {dumps(data)}\n\n"
