"""OpenAI's Responses API: ``POST /v1/responses`` answers; ``GET /v1/responses/{id}`` rereads.

A request names an agent as its ``model``; its ``file_search`` tool's ``vector_store_ids`` are
bucket ids or slugs; ``input`` is the question, or a conversation ending with it. The answer is
rendered by ``citewell.render.responses``; this module only reads the request and keeps the
answer (unless ``store: false``).
"""

from __future__ import annotations

import secrets
import time
from typing import Annotated, Any, Literal

import anyio.to_thread
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import Field, field_validator

from citewell.api.answering import (
    MAX_ITEMS,
    MAX_TEXT,
    ContentPart,
    LooseModel,
    Metadata,
    Name,
    Text,
    event_stream,
    find_agent,
    read_conversation,
    render_choices,
    text_of,
)
from citewell.api.deps import Asking, EngineDep
from citewell.api.links import access_urls
from citewell.api.search import BoundedFilter
from citewell.engine import Engine
from citewell.errors import InvalidRequest, NotFound, UnknownPrevious
from citewell.events import Question
from citewell.model import Answer, CompoundFilter, Filter, Permission, Principal, StoredAnswer, Turn
from citewell.render import ResponseOptions, ResponseStream, render_response
from citewell.render.common import dumps
from citewell.render.records import WireModel

__all__ = ["ResponsesBody", "router"]

router = APIRouter(tags=["responses"])

INPUT_TEXT = ("input_text", "output_text", "text")
"""Content parts read as text: the user's, and replayed assistant output."""


class InputItem(LooseModel):
    """A message (``type`` ``message`` or absent), or another item (replayed tool calls)."""

    type: Name | None = None
    role: Literal["user", "assistant", "system", "developer"] | None = None
    content: Text | list[ContentPart] = Field(default="", max_length=MAX_ITEMS)


class FileSearchTool(WireModel):
    type: Literal["file_search"]
    vector_store_ids: list[Name] = Field(
        max_length=100, description="Buckets searched, by id or slug."
    )
    max_num_results: int | None = Field(default=None, ge=1, le=50)
    filters: BoundedFilter | None = None
    ranking_options: dict[str, Any] | None = None

    def echoed(self) -> dict[str, Any]:
        """The tool as OpenAI echoes it, defaults filled in."""
        return {
            "type": "file_search",
            "vector_store_ids": self.vector_store_ids,
            "filters": None if self.filters is None else self.filters.model_dump(mode="json"),
            "max_num_results": self.max_num_results or 20,
            "ranking_options": self.ranking_options or {"ranker": "auto", "score_threshold": 0.0},
        }


class ToolChoice(WireModel):
    type: Literal["file_search"]


class ResponsesBody(WireModel):
    """The body of ``POST /v1/responses``: what citewell reads, and what it accepts and ignores."""

    model: Name | None = Field(default=None, description="An agent's name; none: the default.")
    input: Text | list[InputItem] = Field(max_length=MAX_ITEMS)
    instructions: Text | None = None
    tools: list[FileSearchTool] = Field(default_factory=list, max_length=16)
    tool_choice: Literal["none", "auto", "required"] | ToolChoice = "auto"
    include: list[Name] = Field(default_factory=list, max_length=16)
    metadata: Metadata | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    previous_response_id: Name | None = None
    store: bool | None = None
    background: bool | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    max_tool_calls: int | None = Field(default=None, ge=0)
    parallel_tool_calls: bool | None = None
    truncation: Literal["auto", "disabled"] | None = None
    user: Name | None = None
    safety_identifier: Name | None = None
    prompt_cache_key: Name | None = None
    prompt_cache_retention: Name | None = None
    service_tier: Name | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    reasoning: dict[str, Any] | None = None
    text: dict[str, Any] | None = None

    @field_validator("input", mode="before")
    @classmethod
    def _string_or_list(cls, value: object) -> object:
        if not isinstance(value, str | list):
            raise ValueError("expected a string or a list of input items")
        if isinstance(value, str) and len(value) > MAX_TEXT:
            raise ValueError(f"the text may be at most {MAX_TEXT} characters long")
        return value


@router.post("/v1/responses", response_model=None)
async def create_response(
    body: ResponsesBody, request: Request, engine: EngineDep, principal: Asking
) -> Response:
    """An answer with its citations, as OpenAI's ``response`` object or its event stream."""
    agent = find_agent(engine, body.model, principal)
    if body.background:
        raise InvalidRequest("Background responses are not supported.", param="background")
    compat, appendix = render_choices(body.metadata, appendix="omit")
    try:
        earlier = await _earlier_turns(engine, body.previous_response_id, principal)
    except NotFound:
        raise UnknownPrevious(
            f"Previous response with id '{body.previous_response_id}' not found.",
            param="previous_response_id",
        ) from None
    conversation = read_conversation(_messages(body.input), body.instructions, param="input")
    retrieve = body.tool_choice != "none"
    question = Question(
        conversation.question,
        history=(*earlier, *conversation.history),
        instructions=conversation.instructions,
        bucket_ids=_buckets(body.tools),
        filters=_filters(body.tools),
        max_passages=min(
            (t.max_num_results for t in body.tools if t.max_num_results), default=None
        ),
        retrieve=retrieve,
    )
    options = ResponseOptions(
        id=secrets.token_hex(12),
        model=agent.name,  # which agent answered, also when the request named an alias
        created_at=int(time.time()),
        citation_compat=compat,
        sources_appendix=appendix,
        show_sources=agent.show_sources,
        retrieve=retrieve,
        instructions=body.instructions,
        tools=tuple(t.echoed() for t in body.tools),
        tool_choice=body.tool_choice
        if isinstance(body.tool_choice, str)
        else body.tool_choice.model_dump(),
        include=tuple(body.include),
        access_url=access_urls(request, principal, Permission.ASK),
        metadata=body.metadata,
        temperature=1.0 if body.temperature is None else body.temperature,
        top_p=1.0 if body.top_p is None else body.top_p,
        max_output_tokens=body.max_output_tokens,
        parallel_tool_calls=True if body.parallel_tool_calls is None else body.parallel_tool_calls,
        previous_response_id=body.previous_response_id,
        store=body.store is not False,
        user=body.user,
    )

    async def keep(answer: Answer, rendered: str) -> None:
        if options.store:
            await anyio.to_thread.run_sync(
                lambda: engine.keep_answer(
                    f"resp_{options.id}",
                    answer,
                    rendered,
                    conversation=question.history,
                    previous_id=body.previous_response_id,
                    principal=principal,
                )
            )

    if body.stream:
        stream = ResponseStream(options)

        async def completed(answer: Answer) -> None:
            assert stream.response is not None
            await keep(answer, dumps(stream.response))

        events = engine.stream(question, agent=agent, principal=principal)
        return await event_stream(events, stream, on_completed=completed)

    answer = await engine.ask(question, agent=agent, principal=principal)
    rendered = dumps(render_response(answer, options))
    await keep(answer, rendered)
    return Response(rendered, media_type="application/json")


@router.get("/v1/responses/{response_id}", response_model=None)
async def get_response(
    response_id: Annotated[str, Field(max_length=256)],
    engine: EngineDep,
    principal: Asking,
    stream: Annotated[bool, Query()] = False,
) -> Response:
    """A stored response, exactly as it was first sent (its stream cannot be replayed)."""
    if stream:
        raise InvalidRequest("Replaying a response as a stream is not supported.", param="stream")
    stored = await _stored(engine, response_id, principal)
    return Response(stored.rendered, media_type="application/json")


async def _stored(engine: Engine, response_id: str, principal: Principal) -> StoredAnswer:
    return await anyio.to_thread.run_sync(
        lambda: engine.stored_answer(response_id, principal=principal)
    )


def _messages(input_: str | list[InputItem]) -> list[tuple[str, str]]:
    """The input as (role, text) messages; replayed tool calls are passed over."""
    if isinstance(input_, str):
        return [("user", input_)]
    messages: list[tuple[str, str]] = []
    for index, item in enumerate(input_):
        if item.type == "file_search_call":
            continue
        if item.type not in (None, "message") or item.role is None:
            raise InvalidRequest(
                f"Input items of type {item.type!r} are not supported: send messages.",
                param=f"input[{index}]",
            )
        text = text_of(item.content, kinds=INPUT_TEXT, param=f"input[{index}].content")
        messages.append((item.role, text))
    return messages


async def _earlier_turns(
    engine: Engine, previous_id: str | None, principal: Principal
) -> tuple[Turn, ...]:
    """The conversation up to and including a stored response, for ``previous_response_id``."""
    if previous_id is None:
        return ()
    stored = await _stored(engine, previous_id, principal)
    turns = [Turn(role, text) for role, text in stored.conversation]
    return (*turns, Turn("user", stored.answer.question), Turn("assistant", stored.answer.text))


def _buckets(tools: list[FileSearchTool]) -> tuple[str, ...] | None:
    """The buckets of the request's file_search tools; None (the agent's) without one."""
    if not tools:
        return None
    return tuple(dict.fromkeys(b for t in tools for b in t.vector_store_ids))


def _filters(tools: list[FileSearchTool]) -> Filter | None:
    filters = [t.filters for t in tools if t.filters is not None]
    if len(filters) > 1:
        return CompoundFilter(type="and", filters=filters)
    return filters[0] if filters else None
