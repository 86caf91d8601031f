"""What generators calling a remote model API share: settings, timeouts, errors by table.

Each remote generator declares one table from its SDK's failures to citewell's ``GeneratorError``
family; ``translated`` applies it at the module boundary, so no SDK exception reaches the engine.
A message names the service and its endpoint, never the key: the key is masked even where the
server echoed it back, and the SDK's exception (whose request carries the key) is not chained.

Remote generators build their SDK client for each answer, on the running event loop, and close
it when the answer ends: nothing is connected before the first question, and no connection
outlives the loop it was made on. The TLS context, the costly part, is made once.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import httpx2
from pydantic import SecretStr

from citewell.config import GenerateSettings, Settings
from citewell.errors import GeneratorError, GeneratorTimeout, GeneratorUnavailable

__all__ = [
    "STATUS_ERRORS",
    "TRANSPORT_ERRORS",
    "Failure",
    "FailureTable",
    "Remote",
    "endpoint_of",
    "env_name",
    "failure_of",
    "required",
    "secret",
    "timeout",
    "tls_context",
    "translated",
]

_MAX_DETAIL = 300
"""Longest part of a server's own error message quoted in ours."""


@dataclass(frozen=True, slots=True)
class Failure:
    """What an upstream exception means for citewell: an error class and a phrase saying why."""

    error: type[GeneratorError]
    reason: str


FailureTable = Mapping[type[Exception] | int | str, Failure]
"""Upstream failure → citewell error. Keys are looked up in this order: an ``int`` is the HTTP
status of the response, a ``str`` the ``error.type`` of its body (the only sign of what went wrong
when a stream fails after its 200), and an exception class matches itself and its subclasses,
the most specific first."""

STATUS_ERRORS: FailureTable = {
    408: Failure(GeneratorTimeout, "timed out"),
    504: Failure(GeneratorTimeout, "timed out behind a gateway"),
}
"""Statuses that mean the same from any service, whatever class the SDK gives them."""

TRANSPORT_ERRORS: FailureTable = {
    # Both SDKs wrap transport errors raised while sending a request; the Anthropic SDK (2.x) does
    # not wrap those raised while reading a streamed response: they arrive as httpx2's own.
    httpx2.TimeoutException: Failure(GeneratorTimeout, "stopped answering mid-stream"),
    httpx2.TransportError: Failure(GeneratorUnavailable, "broke the connection mid-stream"),
    httpx2.HTTPError: Failure(GeneratorError, "failed mid-stream"),
}


@dataclass(frozen=True, slots=True)
class Remote:
    """A remote model service, as named in error messages."""

    service: str
    """What it is: "the OpenAI-compatible API"."""
    endpoint: str
    """Where it is, without credentials or query."""
    secret: str | None = None
    """Masked wherever it would appear in a message."""


def env_name(*path: str) -> str:
    """The environment variable of a setting: ``CITEWELL_GENERATE__OPENAI__BASE_URL``."""
    config = Settings.model_config
    prefix, delimiter = config.get("env_prefix", ""), config.get("env_nested_delimiter") or "__"
    return (prefix + delimiter.join(path)).upper()


def required(value: str | SecretStr | None, generator: str, *path: str, otherwise: str = "") -> str:
    """The value of a setting the generator cannot work without; ``GeneratorUnavailable`` if unset.

    ``path`` is the setting's place in ``Settings`` (``"generate", "openai", "base_url"``);
    ``otherwise`` names another way to give the value, if there is one.
    """
    text = value.get_secret_value() if isinstance(value, SecretStr) else value
    if text is None or not text.strip():
        alternative = f", or {otherwise}" if otherwise else ""
        raise GeneratorUnavailable(
            f"the {generator} generator is not configured: set {'.'.join(path)} "
            f"(environment variable {env_name(*path)}){alternative}"
        )
    return text.strip()


def secret(value: SecretStr | None) -> str | None:
    """A key's value, None when unset or blank."""
    text = value.get_secret_value().strip() if value is not None else ""
    return text or None


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One TLS context for every client: making one costs tens of milliseconds."""
    return httpx2.create_ssl_context()


def timeout(settings: GenerateSettings) -> httpx2.Timeout:
    """How long to wait for a connection, and for each byte of the answer after it."""
    return httpx2.Timeout(settings.timeout, connect=settings.connect_timeout)


def endpoint_of(url: str) -> str:
    """The URL as it may be shown: scheme, host, port and path, without user, password or query."""
    parsed = httpx2.URL(url)
    return str(parsed.copy_with(username=None, password=None, query=None, fragment=None))


@contextmanager
def translated(table: FailureTable, remote: Remote) -> Iterator[None]:
    """Raise the citewell error that ``table`` assigns to any exception raised inside."""
    try:
        yield
    except GeneratorError:
        raise
    except Exception as exc:
        failure = failure_of(exc, table)
        if failure is None:
            raise
        raise failure.error(_message(exc, failure, remote)) from None


def failure_of(exc: BaseException, table: FailureTable) -> Failure | None:
    """The table's entry for ``exc``: by its status, else its body's error type, else its class."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and status in table:
        return table[status]
    kind = _error_type(getattr(exc, "body", None))
    if kind is not None and kind in table:
        return table[kind]
    for cls in type(exc).__mro__:
        if cls in table:
            return table[cls]
    return None


def _error_type(body: object) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    return kind if isinstance(kind, str) else None


def _message(exc: Exception, failure: Failure, remote: Remote) -> str:
    message = f"{remote.service} at {remote.endpoint} {failure.reason}"
    status = getattr(exc, "status_code", None)
    detail = _detail(getattr(exc, "body", None))
    if isinstance(status, int) and status != 200:
        message += f" (HTTP {status}{detail})"
    elif detail:  # an error event in a stream that began with 200
        message += f" ({detail.removeprefix(': ')})"
    if remote.secret:
        message = message.replace(remote.secret, "***")
    return message


def _detail(body: object) -> str:
    """The server's own explanation from an error body, when it gives one."""
    error = body.get("error", body) if isinstance(body, dict) else None
    text = error.get("message") if isinstance(error, dict) else None
    if not isinstance(text, str) or not text.strip():
        return ""
    text = " ".join(text.split())
    return ": " + (text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…")
