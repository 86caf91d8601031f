"""What the remote generators share: settings by name, timeouts, and errors translated by table.

The tables are proved complete here: every exception class the two SDKs (and httpx2) export
finds an entry, and a timeout is always a ``GeneratorTimeout``.
"""

from __future__ import annotations

import functools
import inspect
from types import ModuleType
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from pydantic import SecretStr

from citewell.config import GenerateSettings, Settings
from citewell.errors import GeneratorError, GeneratorTimeout, GeneratorUnavailable
from citewell.generate import anthropic as anthropic_generator
from citewell.generate import openai_compat
from citewell.generate.remote import (
    Failure,
    FailureTable,
    Remote,
    endpoint_of,
    env_name,
    failure_of,
    required,
    secret,
    timeout,
    translated,
)

KEY = "sk-secret-0123456789"
REMOTE = Remote("the test API", "https://api.example/v1", KEY)
REQUEST = httpx2.Request("POST", "https://api.example/v1/chat/completions")


def _exception_classes(module: ModuleType, root: type[Exception]) -> list[type[Exception]]:
    return [
        cls
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, root) and not cls.__name__.startswith("_")
    ]


SDKS = [
    pytest.param(openai, openai.OpenAIError, openai_compat.ERRORS, id="openai"),
    pytest.param(anthropic, anthropic.AnthropicError, anthropic_generator.ERRORS, id="anthropic"),
]


@pytest.mark.parametrize(("module", "root", "table"), SDKS)
def test_every_exception_an_sdk_exports_has_an_entry(
    module: ModuleType, root: type[Exception], table: FailureTable
) -> None:
    classes = _exception_classes(module, root)
    assert len(classes) > 10
    for cls in classes:
        assert failure_of(_instance(cls), table) is not None, cls


@pytest.mark.parametrize(("module", "root", "table"), SDKS)
def test_every_exception_httpx2_exports_has_an_entry(
    module: ModuleType, root: type[Exception], table: FailureTable
) -> None:
    for cls in _exception_classes(httpx2, httpx2.HTTPError):
        failure = failure_of(_instance(cls), table)
        assert failure is not None, cls
        if issubclass(cls, httpx2.TimeoutException):
            assert failure.error is GeneratorTimeout, cls


@pytest.mark.parametrize(("module", "root", "table"), SDKS)
def test_timeouts_are_timeouts_and_refusals_are_unavailable(
    module: Any, root: type[Exception], table: FailureTable
) -> None:
    assert _failure(module.APITimeoutError(request=REQUEST), table).error is GeneratorTimeout
    connection = module.APIConnectionError(request=REQUEST)
    assert _failure(connection, table).error is GeneratorUnavailable
    for status, expected in [
        (400, GeneratorError),
        (401, GeneratorUnavailable),
        (403, GeneratorUnavailable),
        (404, GeneratorUnavailable),
        (408, GeneratorTimeout),
        (422, GeneratorError),
        (429, GeneratorUnavailable),
        (500, GeneratorUnavailable),
        (503, GeneratorUnavailable),
        (504, GeneratorTimeout),
    ]:
        assert _failure(_status_error(module, status), table).error is expected, status


def test_anthropics_overloaded_is_unavailable_by_status_and_in_a_stream() -> None:
    table = anthropic_generator.ERRORS
    assert _failure(_status_error(anthropic, 529), table).error is GeneratorUnavailable
    event = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert _failure(_status_error(anthropic, 200, event), table).error is GeneratorUnavailable


# translated ---------------------------------------------------------------------------------------


def test_the_key_is_masked_even_when_the_server_echoes_it() -> None:
    body = {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "auth"}}
    with pytest.raises(GeneratorUnavailable) as raised, translated(openai_compat.ERRORS, REMOTE):
        raise _status_error(openai, 401, body)
    assert str(raised.value) == (
        "the test API at https://api.example/v1 refused the API key "
        "(HTTP 401: Incorrect API key provided: ***)"
    )
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_a_long_server_message_is_cut() -> None:
    body = {"error": {"message": "word " * 200}}
    with pytest.raises(GeneratorError) as raised, translated(openai_compat.ERRORS, REMOTE):
        raise _status_error(openai, 400, body)
    assert len(str(raised.value)) < 400 and str(raised.value).endswith("…)")


def test_errors_outside_the_table_and_citewells_own_pass_through() -> None:
    with pytest.raises(ValueError), translated(openai_compat.ERRORS, REMOTE):
        raise ValueError("a bug")
    own = GeneratorTimeout("already translated")
    with pytest.raises(GeneratorTimeout) as raised, translated(openai_compat.ERRORS, REMOTE):
        raise own
    assert raised.value is own


def test_a_status_entry_wins_over_the_class() -> None:
    table: FailureTable = {
        400: Failure(GeneratorTimeout, "by status"),
        openai.APIStatusError: Failure(GeneratorError, "by class"),
    }
    assert _failure(_status_error(openai, 400), table).reason == "by status"


def test_an_endpoint_is_shown_without_credentials_or_query() -> None:
    shown = endpoint_of(f"https://user:{KEY}@llm.example:8443/v1?api-key={KEY}#x")
    assert shown == "https://llm.example:8443/v1"


# Settings -----------------------------------------------------------------------------------------


def test_env_name_is_the_variable_settings_read(monkeypatch: pytest.MonkeyPatch) -> None:
    name = env_name("generate", "openai", "base_url")
    assert name == "CITEWELL_GENERATE__OPENAI__BASE_URL"
    monkeypatch.setenv(name, "http://127.0.0.1:8080/v1")
    monkeypatch.setenv(env_name("generate", "anthropic", "api_key"), KEY)
    settings = Settings()
    assert settings.generate.openai.base_url == "http://127.0.0.1:8080/v1"
    assert settings.generate.anthropic.api_key == SecretStr(KEY)


def test_a_missing_setting_is_named_with_its_variable() -> None:
    for blank in (None, "", "  ", SecretStr(" ")):
        with pytest.raises(GeneratorUnavailable) as raised:
            required(blank, "anthropic", "generate", "anthropic", "api_key")
        assert str(raised.value) == (
            "the anthropic generator is not configured: set generate.anthropic.api_key "
            "(environment variable CITEWELL_GENERATE__ANTHROPIC__API_KEY)"
        )
    assert required(SecretStr(f" {KEY} "), "x", "a") == KEY
    assert secret(None) is None and secret(SecretStr(" ")) is None and secret(SecretStr(KEY)) == KEY


def test_the_timeout_waits_for_each_piece_not_the_whole_answer() -> None:
    limits = timeout(GenerateSettings(timeout=30, connect_timeout=2))
    assert (limits.connect, limits.read, limits.write, limits.pool) == (2, 30, 30, 30)


# Helpers ------------------------------------------------------------------------------------------


def _failure(exc: BaseException, table: FailureTable) -> Failure:
    failure = failure_of(exc, table)
    assert failure is not None, exc
    return failure


def _status_error(module: Any, status: int, body: object = None) -> Exception:
    """The exception the SDK raises for a response of this status and body."""
    response = httpx2.Response(status, request=REQUEST, json=body)
    error: Exception = _client(module)._make_status_error(
        f"Error code: {status}", body=body, response=response
    )
    return error


@functools.cache
def _client(module: Any) -> Any:
    if module is openai:
        return openai.AsyncOpenAI(api_key="x", base_url="http://unused/v1")
    return anthropic.AsyncAnthropic(api_key="x", base_url="http://unused")


def _instance(cls: type[Exception]) -> Exception:
    """An instance of an SDK or httpx2 exception class, however its constructor is shaped."""
    response = httpx2.Response(500, request=REQUEST)
    for arguments in (
        {"message": "x", "response": response, "body": None},
        {"request": REQUEST},
        {"message": "x", "request": REQUEST, "body": None},
        {"response": response},
        {},
    ):
        try:
            return cls(**arguments)
        except TypeError:
            continue
    try:
        return cls("x")
    except TypeError:
        return cls.__new__(cls)
