"""What the answering dialects (Responses, Chat Completions) share: the render options in
``metadata``, naming an agent, reading a conversation, and streaming an answer as server-sent
events.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Protocol

import anyio.to_thread
from fastapi.responses import StreamingResponse
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from citewell.api.errors import GENERIC_MESSAGE
from citewell.engine import Engine
from citewell.errors import (
    GeneratorError,
    GeneratorTimeout,
    GeneratorUnavailable,
    InvalidRequest,
    NotFound,
    UnknownModel,
)
from citewell.events import AnswerEvent, Completed, Retrieved
from citewell.model import Agent, Answer, Principal, Turn
from citewell.render import CitationCompat, SourcesAppendix

__all__ = [
    "MAX_ITEMS",
    "MAX_TEXT",
    "ContentPart",
    "Conversation",
    "LooseModel",
    "Metadata",
    "Name",
    "Text",
    "event_stream",
    "find_agent",
    "read_conversation",
    "render_choices",
    "text_of",
]

logger = logging.getLogger("citewell.api")

MAX_TEXT = 200_000
"""Longest single text (a message, the instructions), in code points."""
MAX_ITEMS = 1000
"""Most messages or input items of one request."""

Text = Annotated[str, Field(max_length=MAX_TEXT)]
Name = Annotated[str, Field(max_length=256)]


class LooseModel(BaseModel):
    """An OpenAI object of which citewell reads a few fields and passes over the rest."""

    model_config = ConfigDict(extra="allow")


class ContentPart(LooseModel):
    type: Name
    text: Text | None = None


def text_of(content: str | list[ContentPart] | None, *, kinds: tuple[str, ...], param: str) -> str:
    """A message's text: the string, or its text parts (of the ``kinds`` the dialect names)
    joined by line breaks. Parts of other kinds (images, files) are refused: citewell reads
    text."""
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for index, part in enumerate(content):
        if part.type not in kinds or part.text is None:
            raise InvalidRequest(
                f"Content parts of type {part.type!r} are not supported: citewell reads text.",
                param=f"{param}[{index}]",
            )
        texts.append(part.text)
    return "\n".join(texts)


MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512


def _metadata_limits(metadata: dict[str, str]) -> dict[str, str]:
    """OpenAI's limits: at most 16 pairs, keys up to 64 characters, values up to 512."""
    if len(metadata) > MAX_METADATA_PAIRS:
        raise ValueError(f"at most {MAX_METADATA_PAIRS} pairs are allowed")
    for key, value in metadata.items():
        if len(key) > MAX_METADATA_KEY:
            raise ValueError(f"keys may be at most {MAX_METADATA_KEY} characters long")
        if len(value) > MAX_METADATA_VALUE:
            raise ValueError(f"values may be at most {MAX_METADATA_VALUE} characters long")
    return metadata


Metadata = Annotated[dict[str, str], AfterValidator(_metadata_limits)]
"""A request's ``metadata``: string pairs within OpenAI's limits."""

_CHOICES: dict[str, tuple[str, ...]] = {
    "citation_compat": ("native", "legacy"),
    "sources_appendix": ("omit", "include"),
}


def render_choices(
    metadata: dict[str, str] | None, *, appendix: SourcesAppendix
) -> tuple[CitationCompat, SourcesAppendix]:
    """``metadata.citation_compat`` (default ``native``) and ``metadata.sources_appendix``."""
    metadata = metadata or {}
    for key, allowed in _CHOICES.items():
        value = metadata.get(key)
        if value is not None and value not in allowed:
            raise InvalidRequest(
                f"Invalid 'metadata.{key}': expected one of {', '.join(map(repr, allowed))}, "
                f"got {value!r}.",
                param=f"metadata.{key}",
            )
    compat: CitationCompat = "legacy" if metadata.get("citation_compat") == "legacy" else "native"
    chosen = metadata.get("sources_appendix", appendix)
    return compat, "include" if chosen == "include" else "omit"


def find_agent(engine: Engine, model: str | None, principal: Principal) -> Agent:
    """The agent a request names as its ``model`` (the default agent for none)."""
    try:
        return engine.agent(model, tenant_id=principal.tenant_id)
    except NotFound:
        raise UnknownModel(
            f"The model `{model}` does not exist or you do not have access to it.", param="model"
        ) from None


@dataclass(frozen=True, slots=True)
class Conversation:
    question: str
    history: tuple[Turn, ...]
    instructions: str | None


def read_conversation(
    messages: Sequence[tuple[str, str]], instructions: str | None, *, param: str
) -> Conversation:
    """(role, text) messages → the question (the last message, a user's), the turns before it,
    and the instructions (the request's, then every system or developer message)."""
    if not messages or messages[-1][0] != "user" or not messages[-1][1].strip():
        raise InvalidRequest(
            f"The last item of '{param}' must be a user message with text: the question.",
            param=param,
        )
    notes = [instructions] if instructions else []
    history: list[Turn] = []
    for role, text in messages[:-1]:
        if role in ("system", "developer"):
            notes.append(text)
        elif role == "user":
            history.append(Turn("user", text))
        elif role == "assistant":
            history.append(Turn("assistant", text))
    return Conversation(messages[-1][1], tuple(history), "\n\n".join(notes) or None)


class EventRenderer(Protocol):
    def feed(self, event: AnswerEvent) -> list[str]: ...

    def fail(self, message: str, *, overloaded: bool = False) -> list[str]:
        """The dialect's failure event; ``overloaded``: the backend is down or too slow (a
        dialect that names that kind of failure says so)."""
        ...


async def rendered(renderer: EventRenderer, event: AnswerEvent) -> list[str]:
    """The renderer's lines for an event. Those of the events that carry every passage or the
    whole answer are made in a worker thread: over a large request document they take seconds
    (counting its tokens), which the event loop must not wait for."""
    if isinstance(event, Retrieved | Completed):
        return await anyio.to_thread.run_sync(renderer.feed, event)
    return renderer.feed(event)


async def event_stream(
    events: AsyncIterator[AnswerEvent],
    renderer: EventRenderer,
    *,
    on_completed: Callable[[Answer], Awaitable[None]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> StreamingResponse:
    """An answer's events as server-sent events.

    The first event (the retrieval) is awaited before anything is sent, so an unknown bucket or
    a failing store is still an ordinary HTTP error. A generator failing later ends the stream
    with the dialect's failure event. ``on_completed`` runs before the final events are sent, so
    a client that reads the answer again at once finds it.
    """
    first = await anext(events)

    async def body() -> AsyncIterator[str]:
        try:
            yield "".join(await rendered(renderer, first))
            async for event in events:
                lines = await rendered(renderer, event)
                if isinstance(event, Completed) and on_completed is not None:
                    await on_completed(event.answer)
                if lines:
                    yield "".join(lines)
        except GeneratorError as exc:
            logger.warning("streamed answer failed: %s", exc.message)
            overloaded = isinstance(exc, GeneratorUnavailable | GeneratorTimeout)
            yield "".join(renderer.fail(exc.message, overloaded=overloaded))
        except Exception:
            logger.exception("streamed answer failed")
            yield "".join(renderer.fail(GENERIC_MESSAGE))
        finally:
            close = getattr(events, "aclose", None)  # the engine's stream is an async generator
            if close is not None:
                await close()

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={**(headers or {}), "cache-control": "no-cache", "x-accel-buffering": "no"},
    )
