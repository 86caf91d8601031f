"""Only Unicode scalar text in and out of the HTTP API (``citewell.scalar_text``).

``ScalarTextGuard`` refuses, with a 400 in the caller's dialect naming the field, before
anything is stored:

- a JSON body whose bytes are not UTF-8, or that holds an unpaired surrogate escape
  (``"\\ud800"``), before the app reads a byte of it;
- a form (an upload) with a field, a field name or a file name whose bytes are not UTF-8
  (``citewell.api.form_text``), checked as the body streams to the app: the app is told the
  client went away, and what it answers is replaced by the refusal.

The JSON inside form fields (an upload's ``acl`` and ``metadata``) is checked for surrogate
escapes by the library, for every caller. Query strings, paths and headers are decoded from
bytes, with bad bytes replaced. What goes out is written without surrogates
(``citewell.api.json_response`` and the event renderers), so that a row stored before these
checks existed never breaks a read.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from citewell.api.errors import anthropic_error_response, error_response, is_anthropic
from citewell.api.form_text import BadFormText, FormTextCheck
from citewell.scalar_text import unpaired_escape

__all__ = ["ScalarTextGuard"]

CODE = "invalid_unicode"
MESSAGE = (
    "The request body holds an unpaired UTF-16 surrogate escape (such as \\ud800): text must be"
    " valid Unicode."
)
NOT_UTF8 = "is not valid UTF-8: request text must be UTF-8."
_FORMS = (b"multipart/form-data", b"application/x-www-form-urlencoded")


class ScalarTextGuard:
    """Refuses a JSON request body with an unpaired surrogate escape (pure ASGI middleware).

    Every body but a form's is read here (within the body limit, which wraps this), checked, and
    handed on to the app as it came; what the app reads after it (a disconnect) passes through.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if _is_form(scope):
            await self._form(scope, receive, send)
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
        if not _utf8(body):
            field = _field_not_utf8(body)
            where = f"The field {field!r}" if field else "The body"
            await _refuse(scope, receive, send, f"{where} {NOT_UTF8}", param=field)
            return
        if b"\\u" in body and unpaired_escape(body) is not None:
            await _refuse(scope, receive, send, MESSAGE)
            return
        whole: Message = {"type": "http.request", "body": body, "more_body": False}
        await self.app(scope, _replay([whole], receive), send)

    async def _form(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The app reads the form as it streams, while ``FormTextCheck`` reads it too; at the
        first bad part the app is told the client left, and the refusal is sent instead of
        whatever the app answers (it answers nothing before the whole form is read)."""
        check = FormTextCheck(_header(scope, b"content-type"))
        refused: BadFormText | None = None
        started = False

        async def checked() -> Message:
            nonlocal refused
            message = await receive()
            if message["type"] == "http.request" and refused is None:
                last = not message.get("more_body", False)
                refused = check.feed(message.get("body", b""), last=last)
                if refused is not None:
                    return {"type": "http.disconnect"}
            return message

        async def answer(message: Message) -> None:
            nonlocal started
            if started or refused is None:
                started = started or message["type"] == "http.response.start"
                await send(message)

        try:
            await self.app(scope, checked, answer)
        except Exception:
            if refused is None or started:
                raise
        if refused is not None and not started:
            await _refuse(scope, receive, send, refused.message, param=refused.field)


def _header(scope: Scope, wanted: bytes) -> bytes:
    return next((value for name, value in scope["headers"] if name == wanted), b"")


def _is_form(scope: Scope) -> bool:
    return _header(scope, b"content-type").split(b";", 1)[0].strip().lower() in _FORMS


def _utf8(body: bytes) -> bool:
    if json.detect_encoding(body) not in ("utf-8", "utf-8-sig"):
        return True  # UTF-16 or UTF-32 JSON, which the JSON parser reads as such
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _field_not_utf8(body: bytes) -> str | None:
    """The path (``metadata.k``, ``messages[0].content``) of the first string whose bytes are not
    UTF-8, or None when the body is not JSON."""
    try:
        value = json.loads(body.decode("utf-8", "surrogateescape"))
    except ValueError:
        return None
    found = _bad_path(value, "")
    return found.encode("utf-8", "surrogateescape").decode("utf-8", "replace") if found else None


def _bad_path(value: Any, path: str) -> str | None:
    if isinstance(value, str):
        return path if any("\udc80" <= ch <= "\udcff" for ch in value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            inner = f"{path}.{key}" if path else str(key)
            found = _bad_path(key, inner) or _bad_path(item, inner)
            if found:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _bad_path(item, f"{path}[{index}]")
            if found:
                return found
    return None


def _replay(messages: list[Message], receive: Receive) -> Receive:
    async def replayed() -> Message:
        return messages.pop(0) if messages else await receive()

    return replayed


async def _refuse(
    scope: Scope, receive: Receive, send: Send, message: str, *, param: str | None = None
) -> None:
    if is_anthropic(scope):
        response = anthropic_error_response(scope, 400, message)
    else:
        response = error_response(400, message, code=CODE, param=param)
    await response(scope, receive, send)
