"""The HTTP application: ``create_app(settings)`` builds it, its lifespan opens the library.

Run it with ``citewell serve``, or with ``uvicorn --factory citewell.api.app:serve_app``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from importlib import resources
from types import ModuleType

import anyio.to_thread
from fastapi import Depends, FastAPI
from fastapi.responses import HTMLResponse
from fastapi.routing import APIRoute
from starlette.routing import Match
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

import citewell
from citewell.api import agents as agent_routes  # `agents` names create_app's argument
from citewell.api import (
    buckets,
    chat,
    files,
    health,
    keys,
    links,
    messages,
    models,
    responses,
    search,
    sources,
    vector_stores,
)
from citewell.api.deps import get_principal
from citewell.api.errors import install_error_handlers
from citewell.api.json_response import ScalarJSONResponse
from citewell.api.limits import BodyLimit, Limit
from citewell.api.text_guard import ScalarTextGuard
from citewell.config import Settings
from citewell.engine import Engine
from citewell.library import Library
from citewell.links import LinkSigner
from citewell.model import Agent

__all__ = ["create_app", "serve_app"]

MAX_JSON_BYTES = 1024 * 1024
"""Largest body of any request but an upload; a search request needs a few kilobytes."""
MULTIPART_ALLOWANCE = 256 * 1024
"""Room for multipart framing and form fields on top of the largest file accepted."""
MAX_MESSAGES_BYTES = 32 * 1024 * 1024
"""Largest body of ``POST /v1/messages`` (Anthropic's limit): it may carry PDFs as base64."""
UI_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
"""The browser UI loads nothing from elsewhere and runs no inline script: if a document's text
ever slipped into its markup, it still could not run."""


def create_app(
    settings: Settings, library: Library | None = None, agents: Sequence[Agent] | None = None
) -> FastAPI:
    """The citewell HTTP API. Opens (and closes) a ``Library`` unless one is given.

    ``agents`` are the models clients may name; by default the one default agent.
    """

    def open_engine(app: FastAPI, opened: Library) -> None:
        app.state.library = opened
        app.state.engine = Engine.open(opened, agents, keep_traces=True)
        app.state.keys = opened.keys
        app.state.links = LinkSigner.open(opened.settings.links, opened.settings.data_dir)
        app.state.started_at = int(time.time())
        opened.start_worker()  # takes over the background ingests of servers that died

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if library is not None:
            open_engine(app, library)
            yield
            return
        # Opening may load models and replay an interrupted ingest: keep the event loop free.
        opened = await anyio.to_thread.run_sync(Library.open, settings)
        open_engine(app, opened)
        try:
            yield
        finally:
            app.state.library = None
            app.state.engine = None
            app.state.keys = None
            app.state.links = None
            opened.close()

    app = FastAPI(
        title="citewell",
        version=citewell.__version__,
        summary="Grounded answers over your own documents, with exact citations.",
        lifespan=lifespan,
        # Operation ids are the handlers' names (create_bucket, search, ...): generated clients
        # name their methods after them, so they must not change with paths or tags.
        generate_unique_id_function=lambda route: route.name,
        default_response_class=ScalarJSONResponse,
    )
    install_error_handlers(app)
    app.include_router(health.router)
    # A signed link is opened without a key (in a browser): the token stands in for it.
    app.include_router(links.router)
    # Everything else needs a caller: a valid key, or the local user of an open server.
    for module in (
        buckets,
        sources,
        search,
        responses,
        chat,
        messages,
        models,
        agent_routes,
        files,
        vector_stores,
        keys,
    ):
        app.include_router(module.router, dependencies=[Depends(get_principal)])
    _serve_ui(app)

    max_file = settings.ingest.max_file_bytes
    upload_limit = Limit(
        max_file + MULTIPART_ALLOWANCE,
        f"The file is larger than the limit of {max_file} bytes.",
        "file_too_large",
        "file",
    )
    # An archive holds many files: what it may unpack to bounds it (checked again on reading).
    max_archive = settings.ingest.max_unpacked_bytes
    archive_limit = Limit(
        max_archive + MULTIPART_ALLOWANCE,
        f"The archive is larger than the limit of {max_archive} bytes.",
        "file_too_large",
        "file",
    )
    messages_limit = Limit(
        MAX_MESSAGES_BYTES,
        f"The request body is larger than the limit of {MAX_MESSAGES_BYTES} bytes.",
        "request_too_large",
        None,
    )
    other_limit = Limit(
        MAX_JSON_BYTES,
        f"The request body is larger than the limit of {MAX_JSON_BYTES} bytes.",
        "request_too_large",
        None,
    )
    # The routers' own route objects: matching needs no lookup in the app's route table.
    limits = [
        (_route(sources, "upload_source"), upload_limit),
        (_route(files, "upload_file"), upload_limit),
        (_route(buckets, "import_bucket"), archive_limit),
        (_route(messages, "create_message"), messages_limit),
    ]

    def limit_for(scope: Scope) -> Limit:
        matching = (limit for route, limit in limits if route.matches(scope)[0] is Match.FULL)
        return next(matching, other_limit)

    # Added first, so the body limit wraps it: it never reads more than the limit allows.
    app.add_middleware(ScalarTextGuard)
    app.add_middleware(BodyLimit, limit_for=limit_for)
    return app


def _serve_ui(app: FastAPI) -> None:
    """The browser UI (``citewell/ui``, static files: no build step) at ``/``, its scripts and
    styles under ``/ui/``. The page needs no key: everything it shows comes from the API, asked
    with the key the reader signs in with."""
    page = (resources.files("citewell") / "ui" / "index.html").read_text(encoding="utf-8")

    @app.get("/", include_in_schema=False)
    def ui() -> HTMLResponse:
        return HTMLResponse(page, headers={"Content-Security-Policy": UI_POLICY})

    app.mount("/ui", StaticFiles(packages=[("citewell", "ui")]), name="ui")


def _route(module: ModuleType, name: str) -> APIRoute:
    return next(r for r in module.router.routes if isinstance(r, APIRoute) and r.name == name)


def serve_app() -> FastAPI:
    """``create_app`` with settings from the environment, for ``uvicorn --factory``."""
    return create_app(Settings())
