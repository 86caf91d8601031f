"""The one place where exceptions become HTTP responses, in the shape of the caller's dialect.

OpenAI's, everywhere but on Anthropic's routes:

    {"error": {"message": "...", "type": "invalid_request_error", "param": "slug",
               "code": "invalid_value"}}

``type`` is ``invalid_request_error`` for everything the caller or the input can fix (4xx) and
``server_error`` for the rest (5xx), so the OpenAI SDKs raise their usual exception classes; a
generator with no room for another answer is OpenAI's 429 (``requests``, ``rate_limit_exceeded``).

Anthropic's on ``/v1/messages`` (and on ``/v1/files`` when the request carries an
``anthropic-version`` header), with a ``request-id`` header:

    {"type": "error", "error": {"type": "not_found_error", "message": "..."},
     "request_id": "req_..."}

where ``type`` follows the status (``ANTHROPIC_TYPES``), as the Anthropic SDKs expect.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.types import Scope

from citewell.api.json_response import ScalarJSONResponse as JSONResponse
from citewell.errors import (
    CitewellError,
    ConfigError,
    Conflict,
    FileTooLarge,
    GeneratorBusy,
    GeneratorError,
    GeneratorTimeout,
    GeneratorUnavailable,
    IngestError,
    InvalidRequest,
    NotFound,
    ParseError,
    PermissionDenied,
    QuotaExceeded,
    StoreError,
    Unauthenticated,
    UnknownModel,
    UnknownPrevious,
    UnsupportedFormat,
)
from citewell.links import LinkRefused

__all__ = [
    "ANTHROPIC_TYPES",
    "ERROR_STATUS",
    "anthropic_error_response",
    "error_response",
    "install_error_handlers",
    "is_anthropic",
    "request_id",
]

logger = logging.getLogger("citewell.api")

INVALID = "invalid_request_error"
SERVER = "server_error"
GENERIC_MESSAGE = "The server had an error while processing your request."

ERROR_STATUS: dict[type[CitewellError], tuple[int, str, str | None]] = {
    InvalidRequest: (400, INVALID, "invalid_value"),
    NotFound: (404, INVALID, "not_found"),
    UnknownModel: (404, INVALID, "model_not_found"),
    UnknownPrevious: (400, INVALID, "previous_response_not_found"),
    Unauthenticated: (401, INVALID, "invalid_api_key"),
    PermissionDenied: (403, INVALID, "permission_denied"),
    Conflict: (409, INVALID, "conflict"),
    QuotaExceeded: (429, INVALID, "quota_exceeded"),
    IngestError: (422, INVALID, "invalid_file"),
    FileTooLarge: (413, INVALID, "file_too_large"),
    UnsupportedFormat: (415, INVALID, "unsupported_file"),
    ParseError: (422, INVALID, "invalid_file"),
    StoreError: (503, SERVER, "store_unavailable"),
    GeneratorError: (502, SERVER, "generator_failed"),
    GeneratorUnavailable: (502, SERVER, "generator_unavailable"),
    GeneratorTimeout: (504, SERVER, "generator_timeout"),
    GeneratorBusy: (429, "requests", "rate_limit_exceeded"),
    ConfigError: (500, SERVER, None),
    CitewellError: (500, SERVER, None),
}
"""Status, ``type`` and ``code`` per error class; a class not listed takes its nearest parent's."""

# FastAPI raises a bare 400 when it cannot parse a body at all (bad UTF-8, nesting too deep).
_HTTP_CODES = {
    400: "invalid_body",
    404: "not_found",
    405: "method_not_allowed",
    413: "request_too_large",
}

# Pydantic's error types, named the way OpenAI names the same mistakes.
_VALIDATION_CODES = {
    "missing": "missing_required_parameter",
    "extra_forbidden": "unknown_parameter",
    "json_invalid": "invalid_json",
}


ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
"""Anthropic's ``error.type`` per status; other 4xx are ``invalid_request_error``, other 5xx
``api_error``."""

_ANTHROPIC_PATHS = ("/v1/messages",)
_DIALECT_PATHS = ("/v1/files",)
"""Shared with another dialect: Anthropic's when the request says ``anthropic-version``."""


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path == p or path.startswith(p + "/") for p in prefixes)


def is_anthropic(scope: Scope) -> bool:
    """Whether a request speaks Anthropic's dialect, and so gets Anthropic's error shape."""
    path = scope.get("path", "")
    if _under(path, _ANTHROPIC_PATHS):
        return True
    return _under(path, _DIALECT_PATHS) and any(
        name == b"anthropic-version" for name, _ in scope.get("headers", ())
    )


def request_id(scope: Scope) -> str:
    """The id of this request (``req_…``), made once and kept in the request's state."""
    state = scope.setdefault("state", {})
    if "request_id" not in state:
        state["request_id"] = f"req_{secrets.token_hex(12)}"
    value: str = state["request_id"]
    return value


def anthropic_error_response(
    scope: Scope, status: int, message: str, *, headers: dict[str, str] | None = None
) -> JSONResponse:
    kind = ANTHROPIC_TYPES.get(status) or ("api_error" if status >= 500 else INVALID)
    rid = request_id(scope)
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": rid}
    return JSONResponse(body, status_code=status, headers={**(headers or {}), "request-id": rid})


def _respond(
    request: Request,
    status: int,
    message: str,
    *,
    type_: str | None = None,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    if is_anthropic(request.scope):
        return anthropic_error_response(request.scope, status, message, headers=headers)
    return error_response(status, message, type_=type_, param=param, code=code, headers=headers)


def error_response(
    status: int,
    message: str,
    *,
    type_: str | None = None,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = {
        "error": {
            "message": message,
            "type": type_ or (SERVER if status >= 500 else INVALID),
            "param": param,
            "code": code,
        }
    }
    return JSONResponse(body, status_code=status, headers=headers)


def _citewell_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, CitewellError)
    status, type_, code = next(
        ERROR_STATUS[cls] for cls in type(exc).__mro__ if cls in ERROR_STATUS
    )
    if isinstance(exc, GeneratorBusy):
        # Nothing was tried: the SDKs' retry with backoff is what the caller should do.
        logger.warning("%s %s: %s", request.method, request.url.path, exc.message)
        return _respond(request, status, exc.message, type_=type_, code=code)
    if isinstance(exc, GeneratorError):
        # The generator already retried as its settings say: the SDKs must not retry again.
        logger.warning("%s %s: generator failed: %s", request.method, request.url.path, exc.message)
        return _respond(
            request,
            status,
            exc.message,
            type_=type_,
            code=code,
            headers={"x-should-retry": "false"},
        )
    if status >= 500 and not isinstance(exc, StoreError):
        # Configuration problems are the operator's to read in the log, not the caller's.
        logger.error("%s %s failed: %s", request.method, request.url.path, exc.message)
        return _respond(request, status, GENERIC_MESSAGE, type_=type_)
    param = getattr(exc, "param", None)
    if isinstance(exc, IngestError):
        param = "file"
    if isinstance(exc, LinkRefused):
        code = exc.reason  # which way the link failed: expired, revoked, tampered…
    headers = None
    if isinstance(exc, Unauthenticated):
        headers = {"www-authenticate": "Bearer"}
    elif isinstance(exc, Conflict):
        headers = {"x-should-retry": "false"}  # the OpenAI SDKs retry a 409 unless told not to
    return _respond(
        request, status, exc.message, type_=type_, param=param, code=code, headers=headers
    )


def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors: Sequence[Any] = exc.errors()
    if not errors:
        return _respond(request, 400, "The request is invalid.", code="invalid_value")
    # Where a value may take several shapes ("a string or a list of blocks"), pydantic reports
    # one error per shape; the deepest names the real mistake ("an unknown block type").
    first = max(errors, key=lambda error: len(_path(error.get("loc", ()))))
    kind = str(first.get("type", ""))
    loc = tuple(first.get("loc", ()))
    param = _param(loc)
    if kind == "json_invalid":
        detail = first.get("ctx", {}).get("error", "")
        message = f"The request body is not valid JSON: {detail}.".replace(": .", ".")
        return _respond(request, 400, message, code="invalid_json")
    if kind == "missing" and param is None:
        return _respond(request, 400, "A JSON request body is required.", code="missing_body")
    message = str(first.get("msg", "Invalid value"))
    if param is not None:
        message = f"Invalid '{param}': {message}."
    if len(errors) > 1:
        message += f" ({len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return _respond(
        request, 400, message, param=param, code=_VALIDATION_CODES.get(kind, "invalid_value")
    )


def _param(loc: Sequence[Any]) -> str | None:
    """``("body", "filters", "filters", 0, "key")`` → ``"filters.filters[0].key"``.

    The first element says where the value came from (body, query, path, form, header).
    """
    parts = ""
    for item in _path(loc)[1:]:
        parts += f"[{item}]" if isinstance(item, int) else f".{item}" if parts else str(item)
    return parts or None


def _path(loc: Sequence[Any]) -> tuple[Any, ...]:
    """The location without pydantic's names of union branches (``constrained-str``,
    ``list[...]``), which are no part of the request."""
    return tuple(
        item
        for item in loc
        if not (isinstance(item, str) and ("[" in item or item in _BRANCH_NAMES))
    )


_BRANCH_NAMES = {"constrained-str", "str", "int", "float", "bool", "list", "dict", "none"}


def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"Unknown route: {request.method} {request.url.path}."
    elif exc.status_code == 405:
        message = f"Method {request.method} is not allowed on {request.url.path}."
    else:
        message = str(exc.detail).rstrip(".") + "."
    return _respond(
        request,
        exc.status_code,
        message,
        code=_HTTP_CODES.get(exc.status_code),
        headers=dict(exc.headers) if exc.headers else None,
    )


def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    # Never show a traceback to the caller: it may hold paths, queries or document text.
    logger.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return _respond(request, 500, GENERIC_MESSAGE, type_=SERVER)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(CitewellError, _citewell_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)
