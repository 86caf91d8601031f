"""The one place where exceptions become HTTP responses, all in OpenAI's error shape.

    {"error": {"message": "...", "type": "invalid_request_error", "param": "slug",
               "code": "invalid_value"}}

``type`` is ``invalid_request_error`` for everything the caller or the input can fix (4xx) and
``server_error`` for the rest (5xx), so the OpenAI SDKs raise their usual exception classes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from citewell.errors import (
    CitewellError,
    ConfigError,
    Conflict,
    FileTooLarge,
    GeneratorError,
    GeneratorTimeout,
    GeneratorUnavailable,
    IngestError,
    InvalidRequest,
    NotFound,
    ParseError,
    PermissionDenied,
    StoreError,
    UnsupportedFormat,
)

__all__ = ["ERROR_STATUS", "error_response", "install_error_handlers"]

logger = logging.getLogger("citewell.api")

INVALID = "invalid_request_error"
SERVER = "server_error"
GENERIC_MESSAGE = "The server had an error while processing your request."

ERROR_STATUS: dict[type[CitewellError], tuple[int, str, str | None]] = {
    InvalidRequest: (400, INVALID, "invalid_value"),
    NotFound: (404, INVALID, "not_found"),
    PermissionDenied: (403, INVALID, "permission_denied"),
    Conflict: (409, INVALID, "conflict"),
    IngestError: (422, INVALID, "invalid_file"),
    FileTooLarge: (413, INVALID, "file_too_large"),
    UnsupportedFormat: (415, INVALID, "unsupported_file"),
    ParseError: (422, INVALID, "invalid_file"),
    StoreError: (503, SERVER, "store_unavailable"),
    GeneratorError: (502, SERVER, "generator_failed"),
    GeneratorUnavailable: (502, SERVER, "generator_unavailable"),
    GeneratorTimeout: (504, SERVER, "generator_timeout"),
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
    if isinstance(exc, GeneratorError):
        # The generator already retried as its settings say: the SDKs must not retry again.
        logger.warning("%s %s: generator failed: %s", request.method, request.url.path, exc.message)
        return error_response(
            status, exc.message, type_=type_, code=code, headers={"x-should-retry": "false"}
        )
    if status >= 500 and not isinstance(exc, StoreError):
        # Configuration problems are the operator's to read in the log, not the caller's.
        logger.error("%s %s failed: %s", request.method, request.url.path, exc.message)
        return error_response(status, GENERIC_MESSAGE, type_=type_)
    param = getattr(exc, "param", None)
    if isinstance(exc, IngestError):
        param = "file"
    return error_response(status, exc.message, type_=type_, param=param, code=code)


def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors: Sequence[Any] = exc.errors()
    if not errors:
        return error_response(400, "The request is invalid.", code="invalid_value")
    first = errors[0]
    kind = str(first.get("type", ""))
    loc = tuple(first.get("loc", ()))
    param = _param(loc)
    if kind == "json_invalid":
        detail = first.get("ctx", {}).get("error", "")
        message = f"The request body is not valid JSON: {detail}.".replace(": .", ".")
        return error_response(400, message, code="invalid_json")
    if kind == "missing" and param is None:
        return error_response(400, "A JSON request body is required.", code="missing_body")
    message = str(first.get("msg", "Invalid value"))
    if param is not None:
        message = f"Invalid '{param}': {message}."
    if len(errors) > 1:
        message += f" ({len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return error_response(
        400, message, param=param, code=_VALIDATION_CODES.get(kind, "invalid_value")
    )


def _param(loc: Sequence[Any]) -> str | None:
    """``("body", "filters", "filters", 0, "key")`` → ``"filters.filters[0].key"``.

    The first element says where the value came from (body, query, path, form, header).
    """
    parts = ""
    for item in loc[1:]:
        parts += f"[{item}]" if isinstance(item, int) else f".{item}" if parts else str(item)
    return parts or None


def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"Unknown route: {request.method} {request.url.path}."
    elif exc.status_code == 405:
        message = f"Method {request.method} is not allowed on {request.url.path}."
    else:
        message = str(exc.detail).rstrip(".") + "."
    return error_response(
        exc.status_code,
        message,
        code=_HTTP_CODES.get(exc.status_code),
        headers=dict(exc.headers) if exc.headers else None,
    )


def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    # Never show a traceback to the caller: it may hold paths, queries or document text.
    logger.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return error_response(500, GENERIC_MESSAGE, type_=SERVER)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(CitewellError, _citewell_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)
