"""Request body limits, enforced before the app buffers a byte too many (pure ASGI middleware)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from citewell.api.errors import anthropic_error_response, error_response, is_anthropic

__all__ = ["BodyLimit", "Limit"]

MAX_DRAIN_BYTES = 32 * 1024 * 1024
"""Most bytes of a refused body read (and dropped) so that its sender can read the 413."""


@dataclass(frozen=True, slots=True)
class Limit:
    max_bytes: int
    message: str
    code: str
    param: str | None


class _TooLarge(Exception):
    """Raised into the app when the body it is reading crosses the limit."""


class BodyLimit:
    """Refuses a request body over its limit before the app buffers it (pure ASGI middleware).

    A declared Content-Length over the limit is refused before any byte is handed to the app. A
    body sent without one (chunked) is counted as it arrives; once over the limit the app's read
    fails, and whatever the app answers to that is replaced by the 413.
    """

    def __init__(self, app: ASGIApp, limit_for: Callable[[Scope], Limit]) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope)
        declared = _content_length(scope)
        if declared is not None and declared > limit.max_bytes:
            await _refuse(limit, scope, receive, send, unread=declared)
            return
        received = 0
        body_done = False
        exceeded = False
        started = False

        async def counting_receive() -> Message:
            nonlocal received, body_done, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                body_done = not message.get("more_body", False)
                if received > limit.max_bytes:
                    exceeded = True
                    raise _TooLarge
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if exceeded and not started:
                return  # the app's answer to a cut-off body; the 413 below replaces it
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not exceeded:
                raise
        if exceeded and not started:
            await _refuse(limit, scope, receive, send, unread=0 if body_done else None)


async def _refuse(
    limit: Limit, scope: Scope, receive: Receive, send: Send, *, unread: int | None
) -> None:
    """Answer 413, after reading and dropping what is left of the body when that is not much.

    Clients such as httpx (and so the OpenAI SDK) send their whole body before they read the
    answer: closing on them mid-body makes them see a reset connection instead of the 413.
    ``unread`` is the number of bytes still to come, None when unknown.
    """
    if unread is None or 0 < unread <= MAX_DRAIN_BYTES:
        drained, more = 0, True
        while more and drained <= MAX_DRAIN_BYTES:
            message = await receive()
            if message["type"] != "http.request":
                break
            drained += len(message.get("body", b""))
            more = message.get("more_body", False)
    if is_anthropic(scope):
        response = anthropic_error_response(scope, 413, limit.message)
    else:
        response = error_response(413, limit.message, param=limit.param, code=limit.code)
    response.headers["Connection"] = "close"
    await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
