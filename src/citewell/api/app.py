"""The HTTP application: ``create_app(settings)`` builds it, its lifespan opens the library.

Run it with ``citewell serve``, or with ``uvicorn --factory citewell.api.app:serve_app``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio.to_thread
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import citewell
from citewell.api import buckets, health, search, sources
from citewell.api.errors import error_response, install_error_handlers
from citewell.config import Settings
from citewell.library import Library

__all__ = ["create_app", "serve_app"]

MAX_JSON_BYTES = 1024 * 1024
"""Largest body of any request but an upload; a search request needs a few kilobytes."""
MULTIPART_ALLOWANCE = 256 * 1024
"""Room for multipart framing and form fields on top of the largest file accepted."""
MAX_DRAIN_BYTES = 32 * 1024 * 1024
"""Most bytes of a refused body read (and dropped) so that its sender can read the 413."""


def create_app(settings: Settings, library: Library | None = None) -> FastAPI:
    """The citewell HTTP API. Opens (and closes) a ``Library`` unless one is given."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if library is not None:
            app.state.library = library
            yield
            return
        # Opening may load models and replay an interrupted ingest: keep the event loop free.
        opened = await anyio.to_thread.run_sync(Library.open, settings)
        app.state.library = opened
        try:
            yield
        finally:
            app.state.library = None
            opened.close()

    app = FastAPI(
        title="citewell",
        version=citewell.__version__,
        summary="Grounded answers over your own documents, with exact citations.",
        lifespan=lifespan,
        # Operation ids are the handlers' names (create_bucket, search, ...): generated clients
        # name their methods after them, so they must not change with paths or tags.
        generate_unique_id_function=lambda route: route.name,
    )
    install_error_handlers(app)
    for module in (health, buckets, sources, search):
        app.include_router(module.router)

    # The router's own route object: matching needs no lookup in the app's route table.
    upload_route = next(
        r for r in sources.router.routes if isinstance(r, APIRoute) and r.name == "upload_source"
    )
    max_file = settings.ingest.max_file_bytes
    upload_limit = _Limit(
        max_file + MULTIPART_ALLOWANCE,
        f"The file is larger than the limit of {max_file} bytes.",
        "file_too_large",
        "file",
    )
    other_limit = _Limit(
        MAX_JSON_BYTES,
        f"The request body is larger than the limit of {MAX_JSON_BYTES} bytes.",
        "request_too_large",
        None,
    )

    def limit_for(scope: Scope) -> _Limit:
        matched, _ = upload_route.matches(scope)
        return upload_limit if matched is Match.FULL else other_limit

    app.add_middleware(_BodyLimit, limit_for=limit_for)
    return app


def serve_app() -> FastAPI:
    """``create_app`` with settings from the environment, for ``uvicorn --factory``."""
    return create_app(Settings())


@dataclass(frozen=True, slots=True)
class _Limit:
    max_bytes: int
    message: str
    code: str
    param: str | None


class _TooLarge(Exception):
    """Raised into the app when the body it is reading crosses the limit."""


class _BodyLimit:
    """Refuses a request body over its limit before the app buffers it (pure ASGI middleware).

    A declared Content-Length over the limit is refused before any byte is handed to the app. A
    body sent without one (chunked) is counted as it arrives; once over the limit the app's read
    fails, and whatever the app answers to that is replaced by the 413.
    """

    def __init__(self, app: ASGIApp, limit_for: Callable[[Scope], _Limit]) -> None:
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
    limit: _Limit, scope: Scope, receive: Receive, send: Send, *, unread: int | None
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
