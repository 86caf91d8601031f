"""OpenAI's Chat Completions: ``POST /v1/chat/completions``.

A request names an agent as its ``model`` and answers from the agent's buckets. System and
developer messages become the instructions, earlier turns the history, the last user message
the question. The answer is rendered by ``citewell.render.chat``: ``url_citation`` annotations
and, unless ``metadata.sources_appendix`` is ``omit``, a "Sources:" list in the content.
"""

from __future__ import annotations

import secrets
import time
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import Field

from citewell.api.answering import (
    MAX_ITEMS,
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
from citewell.errors import InvalidRequest
from citewell.events import Question
from citewell.model import Permission
from citewell.render import ChatOptions, ChatStream, render_completion
from citewell.render.common import dumps
from citewell.render.records import WireModel

__all__ = ["ChatBody", "router"]

router = APIRouter(tags=["chat"])


class ChatMessage(LooseModel):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: Text | list[ContentPart] | None = Field(default=None, max_length=MAX_ITEMS)


class StreamOptions(WireModel):
    include_usage: bool = False
    include_obfuscation: bool | None = None


class ChatBody(WireModel):
    """The body of ``POST /v1/chat/completions``: what citewell reads, and what it ignores."""

    model: Name | None = Field(default=None, description="An agent's name; none: the default.")
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_ITEMS)
    stream: bool = False
    stream_options: StreamOptions | None = None
    metadata: Metadata | None = None
    n: int | None = Field(default=None, ge=1, le=1, description="Only one choice is made.")
    tools: list[dict[str, Any]] | None = Field(default=None, max_length=0)
    tool_choice: Literal["none", "auto"] | None = None
    response_format: dict[str, Any] | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: Name | list[Name] | None = None
    seed: int | None = None
    user: Name | None = None
    store: bool | None = None
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    parallel_tool_calls: bool | None = None
    service_tier: Name | None = None
    prompt_cache_key: Name | None = None
    safety_identifier: Name | None = None
    reasoning_effort: Name | None = None
    verbosity: Name | None = None


@router.post("/v1/chat/completions", response_model=None)
async def create_chat_completion(
    body: ChatBody, request: Request, engine: EngineDep, principal: Asking
) -> Response:
    """An answer with its citations, as a ``chat.completion`` or its chunks."""
    agent = find_agent(engine, body.model, principal)
    if body.response_format is not None and body.response_format.get("type") != "text":
        raise InvalidRequest(
            "Only text answers are supported: response_format must be {'type': 'text'}.",
            param="response_format",
        )
    compat, appendix = render_choices(body.metadata, appendix="include")
    messages = [
        (m.role, text_of(m.content, kinds=("text",), param=f"messages[{i}].content"))
        for i, m in enumerate(body.messages)
    ]
    conversation = read_conversation(messages, None, param="messages")
    retrieve = body.tool_choice != "none"
    question = Question(
        conversation.question,
        history=conversation.history,
        instructions=conversation.instructions,
        retrieve=retrieve,
    )
    options = ChatOptions(
        id=secrets.token_hex(12),
        model=agent.name,  # which agent answered, also when the request named an alias
        created_at=int(time.time()),
        citation_compat=compat,
        sources_appendix=appendix,
        show_sources=agent.show_sources,
        retrieve=retrieve,
        instructions=conversation.instructions,
        access_url=access_urls(request, principal, Permission.ASK),
        include_usage=body.stream_options is not None and body.stream_options.include_usage,
        metadata=body.metadata,
    )
    if body.stream:
        events = engine.stream(question, agent=agent, principal=principal)
        return await event_stream(events, ChatStream(options))
    answer = await engine.ask(question, agent=agent, principal=principal)
    return Response(dumps(render_completion(answer, options)), media_type="application/json")
