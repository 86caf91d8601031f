"""Anthropic's Messages API: ``POST /v1/messages``, with document citations.

A request names an agent as its ``model``. Its ``document`` and ``search_result`` blocks (in any
user message; ``document_index`` and ``search_result_index`` count them separately over the whole
request) are the evidence, and nothing is retrieved; without any, the agent retrieves from its
buckets and cites what it found as search results. ``system`` (and mid-conversation system
messages) become the instructions, the last user message's text the question. The answer is
rendered by ``citewell.render.messages``; errors take Anthropic's shape (``api/errors.py``).

``anthropic-version`` decides the validation (wire-formats C.3.4): ``2026-10-21`` (what SDK 2.x
sends) refuses documents in assistant turns, citations on user text blocks and any
``temperature``/``top_p``/``top_k``; ``2023-06-01`` (SDK 0.x/1.x; the default) accepts them.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import anyio.to_thread
from fastapi import APIRouter, Header, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from citewell.api.answering import MAX_ITEMS, MAX_TEXT, Name, Text, event_stream
from citewell.api.deps import Asking, EngineDep
from citewell.api.errors import request_id
from citewell.api.files import get_files
from citewell.api.links import access_urls
from citewell.documents import (
    BlocksBody,
    PdfBody,
    RequestDocument,
    RequestSearchResult,
    TextBody,
    decode_pdf,
)
from citewell.errors import (
    FileTooLarge,
    InvalidRequest,
)
from citewell.events import Question
from citewell.model import Permission, Turn
from citewell.render.common import dumps
from citewell.render.messages import MessageOptions, MessageStream, render_message
from citewell.uploads import FileStore

__all__ = ["MessagesBody", "router"]


router = APIRouter(tags=["messages"])

OLD_VERSION = "2023-06-01"
NEW_VERSION = "2026-10-21"
"""From this version on, the stricter rules of wire-formats C.3.4 apply."""
_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}")


class _Block(BaseModel):
    """A block of which citewell reads a few fields (``cache_control`` and the like pass)."""

    model_config = ConfigDict(extra="allow")


class CitationsConfig(_Block):
    enabled: bool = False


class TextBlock(_Block):
    type: Literal["text"]
    text: Text
    citations: list[dict[str, Any]] | None = None


class ImageBlock(_Block):
    type: Literal["image"]


class PlainTextSource(_Block):
    type: Literal["text"]
    media_type: Literal["text/plain"] = "text/plain"
    data: Annotated[str, Field(max_length=50 * MAX_TEXT)]


class Base64PdfSource(_Block):
    type: Literal["base64"]
    media_type: Literal["application/pdf"]
    data: str


class ContentSource(_Block):
    type: Literal["content"]
    content: Text | list[Annotated[TextBlock | ImageBlock, Field(discriminator="type")]] = Field(
        max_length=MAX_ITEMS
    )


class FileSource(_Block):
    type: Literal["file"]
    file_id: Name


class UrlSource(_Block):
    type: Literal["url"]
    url: str


DocumentSource = Annotated[
    PlainTextSource | Base64PdfSource | ContentSource | FileSource | UrlSource,
    Field(discriminator="type"),
]


class DocumentBlock(_Block):
    type: Literal["document"]
    source: DocumentSource
    title: Annotated[str, Field(max_length=500)] | None = None
    context: Text | None = None
    citations: CitationsConfig | None = None


class SearchResultBlock(_Block):
    type: Literal["search_result"]
    source: Text
    title: Text
    content: list[TextBlock] = Field(max_length=MAX_ITEMS)
    citations: CitationsConfig | None = None


class ToolResultBlock(_Block):
    type: Literal["tool_result"]
    tool_use_id: Name
    content: (
        Text
        | list[Annotated[TextBlock | SearchResultBlock | ImageBlock, Field(discriminator="type")]]
        | None
    ) = None


class PassedBlock(_Block):
    """Replayed assistant output citewell does not read."""

    type: Literal["thinking", "redacted_thinking", "tool_use"]


ContentBlock = Annotated[
    TextBlock | DocumentBlock | SearchResultBlock | ToolResultBlock | ImageBlock | PassedBlock,
    Field(discriminator="type"),
]


class MessageParam(_Block):
    role: Literal["user", "assistant", "system"]
    content: Text | list[ContentBlock] = Field(max_length=MAX_ITEMS)


class MessagesBody(BaseModel):
    """The body of ``POST /v1/messages``: what citewell reads; other fields are accepted and
    passed over (``tools``, ``thinking``, ``service_tier`` …)."""

    model_config = ConfigDict(extra="allow")

    model: Name = Field(description="An agent's name.")
    max_tokens: int = Field(ge=1, description="Required by the API; citewell's answers are short.")
    messages: list[MessageParam] = Field(min_length=1, max_length=MAX_ITEMS)
    system: Text | list[TextBlock] | None = None
    stream: bool = False
    stop_sequences: list[Name] | None = Field(default=None, max_length=16)
    metadata: dict[str, Any] | None = None
    temperature: float | None = Field(default=None, ge=0, le=1)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    output_config: dict[str, Any] | None = None
    output_format: dict[str, Any] | None = None


def api_version(value: str | None) -> str:
    """The version a request asked for; none: 2023-06-01. Dates after 2026-10-21 follow it."""
    if value is None or not value.strip():
        return OLD_VERSION
    value = value.strip()
    if not _VERSION.fullmatch(value):
        raise InvalidRequest(
            f"anthropic-version: {value[:40]!r} is not a valid version.", param="anthropic-version"
        )
    return NEW_VERSION if value >= NEW_VERSION else OLD_VERSION


@router.post("/v1/messages", response_model=None)
async def create_message(
    body: MessagesBody,
    request: Request,
    engine: EngineDep,
    principal: Asking,
    anthropic_version: Annotated[str | None, Header()] = None,
) -> Response:
    """An answer as Anthropic's ``message``, its text blocks citing the request's documents (or
    what the agent retrieved), or as its event stream."""
    rid = request_id(request.scope)
    version = api_version(anthropic_version)
    agent = engine.agent(body.model, tenant_id=principal.tenant_id)
    limit = engine.library.settings.ingest.max_request_document_bytes
    reading = _Reading(body, version, get_files(request), principal.tenant_id, limit)
    conversation = await anyio.to_thread.run_sync(reading.read)
    given = None
    instructions = reading.instructions()
    if reading.items:
        documents = await anyio.to_thread.run_sync(engine.library.read_documents, reading.items)
        given = documents.given
        if documents.notes:
            instructions = "\n\n".join(filter(None, [instructions, documents.notes]))
    question = Question(
        conversation[-1].text,
        history=tuple(conversation[:-1]),
        instructions=instructions,
        given=given,
    )
    options = MessageOptions(
        id=secrets.token_hex(12),
        model=agent.name,  # which agent answered, also when the request named an alias
        created_at=int(time.time()),
        show_sources=agent.show_sources,
        instructions=instructions,
        citables=documents.citables if given is not None else {},
        access_url=access_urls(request, principal, Permission.ASK),
        request_id=rid,
    )
    headers = {"request-id": rid}
    if body.stream:
        stream = MessageStream(options)
        events = engine.stream(question, agent=agent, principal=principal)
        return await event_stream(events, stream, headers=headers)
    answer = await engine.ask(question, agent=agent, principal=principal)
    # In a worker thread, as ``rendered``: counting a large document's tokens takes a while.
    message = await anyio.to_thread.run_sync(lambda: dumps(render_message(answer, options)))
    return Response(message, media_type="application/json", headers=headers)


class _Reading:
    """Reads a request's messages: turns, instructions, documents and search results, and
    checks the rules of citations and of the API version."""

    def __init__(
        self, body: MessagesBody, version: str, files: FileStore, tenant: str, max_bytes: int
    ) -> None:
        self.body = body
        self.strict = version == NEW_VERSION
        self.files = files
        self.tenant = tenant
        self.max_bytes = max_bytes
        """Most bytes of all the request's documents together."""
        self.items: list[RequestDocument | RequestSearchResult] = []
        self.notes: list[str] = []
        self._documents = 0
        self._results = 0
        self._bytes = 0

    def instructions(self) -> str | None:
        return "\n\n".join(self.notes) or None

    def read(self) -> list[Turn]:
        body = self.body
        if self.strict:
            for name in ("temperature", "top_p", "top_k"):
                if name in body.model_fields_set:
                    raise InvalidRequest(
                        f"{name}: this parameter is not supported in API version {NEW_VERSION}.",
                        param=name,
                    )
        if isinstance(body.system, str):
            self.notes.append(body.system)
        elif body.system:
            self.notes.append("\n".join(b.text for b in body.system))
        turns: list[Turn] = []
        for index, message in enumerate(body.messages):
            text = self._message(message, f"messages.{index}")
            if message.role == "system":
                self.notes.append(text)
            elif turns and turns[-1].role == message.role:
                turns[-1] = Turn(message.role, "\n\n".join(filter(None, [turns[-1].text, text])))
            else:
                turns.append(Turn(message.role, text))
        self._check_citation_settings()
        if not turns or turns[-1].role != "user" or not turns[-1].text.strip():
            raise InvalidRequest(
                "messages: the last message must be a user message with text: the question.",
                param="messages",
            )
        return turns

    def _message(self, message: MessageParam, param: str) -> str:
        if isinstance(message.content, str):
            return message.content
        texts: list[str] = []
        for index, block in enumerate(message.content):
            at = f"{param}.content.{index}"
            if isinstance(block, TextBlock):
                if block.citations and message.role == "user" and self.strict:
                    raise InvalidRequest(
                        f"{at}.citations: text blocks in user messages cannot carry citations.",
                        param=at,
                    )
                texts.append(block.text)
            elif isinstance(block, DocumentBlock):
                if message.role != "user" and (self.strict or message.role == "system"):
                    raise InvalidRequest(f"{at}: documents belong in user messages.", param=at)
                self.items.append(self._document(block, at))
            elif isinstance(block, SearchResultBlock):
                if message.role != "user":
                    raise InvalidRequest(f"{at}: search results belong in user messages.", param=at)
                self.items.append(self._search_result(block, at))
            elif isinstance(block, ToolResultBlock):
                texts.extend(self._tool_result(block, at))
            elif isinstance(block, ImageBlock):
                raise InvalidRequest(f"{at}: image blocks are not supported.", param=at)
        return "\n\n".join(t for t in texts if t)

    def _tool_result(self, block: ToolResultBlock, at: str) -> list[str]:
        if block.content is None or isinstance(block.content, str):
            return [block.content or ""]
        kinds = {type(b) for b in block.content}
        if SearchResultBlock in kinds and len(kinds) > 1:
            raise InvalidRequest(
                f"{at}.content: when one block of a tool result is a search result, all must be.",
                param=at,
            )
        texts = []
        for index, inner in enumerate(block.content):
            if isinstance(inner, SearchResultBlock):
                self.items.append(self._search_result(inner, f"{at}.content.{index}"))
            elif isinstance(inner, TextBlock):
                texts.append(inner.text)
            else:
                raise InvalidRequest(
                    f"{at}.content.{index}: image blocks are not supported.", param=at
                )
        return texts

    def _document(self, block: DocumentBlock, at: str) -> RequestDocument:
        index = self._documents
        self._documents += 1
        source = block.source
        param = f"{at}.source"
        file_id = None
        body: TextBody | PdfBody | BlocksBody
        if isinstance(source, PlainTextSource):
            body = TextBody(source.data)
        elif isinstance(source, Base64PdfSource):
            body = PdfBody(decode_pdf(source.data, param=param))
        elif isinstance(source, ContentSource):
            body = BlocksBody(_texts(source.content, param))
        elif isinstance(source, FileSource):
            file_id = source.file_id
            body = self._file(file_id, param)
        else:
            raise InvalidRequest(
                f"{param}: URL sources are not supported (citewell does not fetch); upload the "
                "file or send it as base64.",
                param=param,
            )
        self._count(body)
        return RequestDocument(
            index=index,
            body=body,
            title=block.title,
            context=block.context,
            cite=bool(block.citations and block.citations.enabled),
            file_id=file_id,
            param=param,
        )

    def _count(self, body: TextBody | PdfBody | BlocksBody) -> None:
        if isinstance(body, TextBody):
            self._bytes += len(body.text.encode("utf-8", "surrogatepass"))
        elif isinstance(body, PdfBody):
            self._bytes += len(body.data)
        else:
            self._bytes += sum(len(text.encode("utf-8", "surrogatepass")) for text in body.blocks)
        if self._bytes > self.max_bytes:
            raise FileTooLarge(
                f"The request's documents are larger than the limit of {self.max_bytes:,} bytes"
                " all together (CITEWELL_INGEST__MAX_REQUEST_DOCUMENT_BYTES)."
            )

    def _file(self, file_id: str, param: str) -> TextBody | PdfBody:
        stored = self.files.get(file_id, tenant_id=self.tenant)
        data = self.files.content(file_id, tenant_id=self.tenant)
        if stored.mime_type == "application/pdf":
            return PdfBody(data)
        if stored.mime_type.startswith("text/"):
            try:
                return TextBody(data.decode("utf-8-sig"))
            except UnicodeDecodeError:
                pass
        raise InvalidRequest(
            f"{param}: file {file_id} ({stored.mime_type}) cannot be read as a document; "
            "upload a PDF or UTF-8 text.",
            param=param,
        )

    def _search_result(self, block: SearchResultBlock, at: str) -> RequestSearchResult:
        if self.strict and any(b.citations for b in block.content):
            raise InvalidRequest(
                f"{at}.content: text blocks in user messages cannot carry citations.", param=at
            )
        index = self._results
        self._results += 1
        return RequestSearchResult(
            index=index,
            source=block.source,
            title=block.title,
            blocks=tuple(b.text for b in block.content),
            cite=bool(block.citations and block.citations.enabled),
        )

    def _check_citation_settings(self) -> None:
        documents = {i.cite for i in self.items if isinstance(i, RequestDocument)}
        results = {i.cite for i in self.items if isinstance(i, RequestSearchResult)}
        if len(documents) > 1:
            raise InvalidRequest(
                "Citations must be enabled on all or none of the documents of a request.",
                param="messages",
            )
        if len(results) > 1:
            raise InvalidRequest(
                "Citations must be enabled on all or none of the search results of a request.",
                param="messages",
            )
        body = self.body
        wants_format = (body.output_config or {}).get("format") is not None
        if (True in documents or True in results) and (wants_format or body.output_format):
            raise InvalidRequest(
                "Citations cannot be used together with output_config.format (structured outputs).",
                param="output_config.format",
            )


def _texts(content: str | Sequence[TextBlock | ImageBlock], param: str) -> tuple[str, ...]:
    if isinstance(content, str):
        return (content,)
    texts = []
    for index, block in enumerate(content):
        if not isinstance(block, TextBlock):
            raise InvalidRequest(
                f"{param}.content.{index}: only text can be cited; image blocks are not supported.",
                param=param,
            )
        texts.append(block.text)
    return tuple(texts)
