"""Only Unicode scalar text in and out of the HTTP API (``citewell.scalar_text``).

``ScalarTextGuard`` refuses, with a 400 in the caller's dialect and before the app reads a byte,
a JSON body holding an unpaired surrogate escape; the JSON of multipart fields (an upload's
``acl`` and ``metadata``) is checked by the library, for every caller. Query strings, paths,
headers and multipart text cannot carry surrogates: they are decoded from bytes, with bad bytes
replaced.
What goes out is written without surrogates (``citewell.api.json_response`` and the event
renderers), so that a row stored before this check existed never breaks a read.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from citewell.api.errors import anthropic_error_response, error_response, is_anthropic
from citewell.scalar_text import unpaired_escape

__all__ = ["ScalarTextGuard"]

CODE = "invalid_unicode"
MESSAGE = (
    "The request body holds an unpaired UTF-16 surrogate escape (such as \\ud800): text must be"
    " valid Unicode."
)
_FORMS = (b"multipart/form-data", b"application/x-www-form-urlencoded")


class ScalarTextGuard:
    """Refuses a JSON request body with an unpaired surrogate escape (pure ASGI middleware).

    Every body but a form's is read here (within the body limit, which wraps this), checked, and
    handed on to the app as it came; what the app reads after it (a disconnect) passes through.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _is_form(scope):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message], receive), send)
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if b"\\u" in body and unpaired_escape(body) is not None:
            await _refuse(scope, receive, send)
            return
        whole: Message = {"type": "http.request", "body": body, "more_body": False}
        await self.app(scope, _replay([whole], receive), send)


def _is_form(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower() in _FORMS
    return False


def _replay(messages: list[Message], receive: Receive) -> Receive:
    async def replayed() -> Message:
        return messages.pop(0) if messages else await receive()

    return replayed


async def _refuse(scope: Scope, receive: Receive, send: Send) -> None:
    if is_anthropic(scope):
        response = anthropic_error_response(scope, 400, MESSAGE)
    else:
        response = error_response(400, MESSAGE, code=CODE)
    await response(scope, receive, send)
