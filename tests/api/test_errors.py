"""Every failure, on every route, is an error body of the route's dialect with the right status:
Anthropic's on ``/v1/messages``, OpenAI's everywhere else."""

from __future__ import annotations

import inspect
import logging
import re

import pytest
from fastapi.testclient import TestClient

import citewell.errors
from citewell.api import create_app
from citewell.api.deps import get_principal
from citewell.api.errors import ERROR_STATUS
from citewell.config import Settings
from citewell.errors import (
    CitewellError,
    ConfigError,
    Conflict,
    FileTooLarge,
    InvalidRequest,
    NotFound,
    ParseError,
    PermissionDenied,
    QuotaExceeded,
    StoreError,
    Unauthenticated,
    UnsupportedFormat,
)
from tests.api.conftest import Response, assert_error
from tests.api.test_messages import assert_anthropic_error


def routes(client: TestClient) -> list[tuple[str, str]]:
    """(method, path) of every operation the app documents."""
    spec = client.get("/openapi.json").json()
    return [(m.upper(), path) for path, methods in spec["paths"].items() for m in methods]


def bad_request(client: TestClient, method: str, path: str) -> tuple[Response, int] | None:
    """A request the route must refuse, and the status it must refuse it with."""
    url = re.sub(r"\{[^}]+\}", "nope", path)
    if method == "POST":
        headers = {"content-type": "application/json"}
        return client.post(url, content=b"{not json", headers=headers), 400
    if url != path:
        # A token that is not a link is refused rather than missing (docs/api.md, Signed links).
        return client.request(method, url), 403 if path.startswith("/v1/links/") else 404
    return None  # nothing in it can be wrong but its method, checked below


def test_every_route_answers_a_bad_request_in_the_error_shape(client: TestClient) -> None:
    """Unknown ids in the path, a body that is not what the route wants, a wrong method."""
    for method, path in routes(client):
        bad = bad_request(client, method, path)
        url = re.sub(r"\{[^}]+\}", "nope", path)
        if path.startswith("/v1/messages"):
            if bad is not None:
                assert_anthropic_error(bad[0], bad[1], "invalid_request_error")
            assert_anthropic_error(client.request("PATCH", url), 405, "invalid_request_error")
            continue
        if bad is not None:
            response, status = bad
            assert_error(response, status)
        assert_error(client.request("PATCH", url), 405, code="method_not_allowed")


def test_an_unknown_route_is_404_in_the_error_shape(client: TestClient) -> None:
    error = assert_error(client.get("/v1/nothing-here"), 404, code="not_found")
    assert error["message"] == "Unknown route: GET /v1/nothing-here."


def test_a_wrong_method_is_405_and_says_which_are_allowed(client: TestClient) -> None:
    response = client.put("/v1/search", json={})
    assert_error(response, 405, code="method_not_allowed")
    assert response.headers["allow"] == "POST"


def test_malformed_json_is_400_invalid_json(client: TestClient) -> None:
    response = client.post(
        "/v1/search", content=b'{"query": "x",', headers={"content-type": "application/json"}
    )
    error = assert_error(response, 400, code="invalid_json")
    assert error["message"].startswith("The request body is not valid JSON")


def test_json_with_invalid_utf8_is_400(client: TestClient) -> None:
    response = client.post(
        "/v1/search",
        content=b'{"query": "\xff\xfe", "buckets": ["a"]}',
        headers={"content-type": "application/json"},
    )
    assert_error(response, 400)


def test_a_missing_body_is_400(client: TestClient) -> None:
    assert_error(client.post("/v1/search"), 400, code="missing_body")


def test_a_body_of_the_wrong_type_is_400(client: TestClient) -> None:
    assert_error(client.post("/v1/search", json=["query"]), 400)


def test_an_unknown_field_is_refused_by_name(client: TestClient) -> None:
    response = client.post("/v1/buckets", json={"slug": "notes", "colour": "red"})
    error = assert_error(response, 400, code="unknown_parameter")
    assert error["param"] == "colour"


def test_a_nested_field_is_named_by_its_path(client: TestClient) -> None:
    body = {
        "query": "x",
        "buckets": ["notes"],
        "filters": {"type": "and", "filters": [{"type": "eq", "key": "", "value": 1}]},
    }
    error = assert_error(client.post("/v1/search", json=body), 400)
    assert error["param"] == "filters.and.filters[0].eq.key"


def test_a_body_over_one_mebibyte_is_refused_with_413(client: TestClient) -> None:
    body = b'{"query": "' + b"x" * (1024 * 1024) + b'", "buckets": ["a"]}'
    response = client.post("/v1/search", content=body, headers={"content-type": "application/json"})
    assert_error(response, 413, code="request_too_large")


def test_every_citewell_error_has_its_own_status() -> None:
    """A new error class must be given a status here on purpose, not inherit one by accident."""
    classes = {
        cls
        for _, cls in inspect.getmembers(citewell.errors, inspect.isclass)
        if issubclass(cls, CitewellError)
    }
    assert classes == set(ERROR_STATUS)


@pytest.mark.parametrize(
    ("exc", "status", "type_", "code"),
    [
        (InvalidRequest("bad", param="x"), 400, "invalid_request_error", "invalid_value"),
        (NotFound("gone", param="x"), 404, "invalid_request_error", "not_found"),
        (Unauthenticated("who?", param="x"), 401, "invalid_request_error", "invalid_api_key"),
        (PermissionDenied("no", param="x"), 403, "invalid_request_error", "permission_denied"),
        (Conflict("clash", param="x"), 409, "invalid_request_error", "conflict"),
        (QuotaExceeded("later", param="x"), 429, "invalid_request_error", "quota_exceeded"),
        (FileTooLarge("big"), 413, "invalid_request_error", "file_too_large"),
        (UnsupportedFormat("what"), 415, "invalid_request_error", "unsupported_file"),
        (ParseError("broken"), 422, "invalid_request_error", "invalid_file"),
        (StoreError("down"), 503, "server_error", "store_unavailable"),
    ],
)
def test_citewell_errors_map_to_statuses(
    settings: Settings, exc: CitewellError, status: int, type_: str, code: str
) -> None:
    app = create_app(settings)

    def fail() -> None:
        raise exc

    app.dependency_overrides[get_principal] = fail
    with TestClient(app) as client:
        response = client.get("/v1/buckets/x")
        error = assert_error(response, status, code=code)
    assert error["type"] == type_
    # The OpenAI SDKs retry 409s (and any status) unless told not to: a conflict stays one.
    assert response.headers.get("x-should-retry") == ("false" if status == 409 else None)
    assert error["message"] == exc.message
    if isinstance(exc, InvalidRequest):
        assert error["param"] == "x"


def test_an_unexpected_error_is_500_logged_and_not_leaked(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(settings)

    def fail() -> None:
        raise RuntimeError("/srv/secret/path.db is corrupt")

    app.dependency_overrides[get_principal] = fail
    with TestClient(app, raise_server_exceptions=False) as client:
        error = assert_error(client.get("/v1/buckets"), 500)
    assert error["code"] is None
    assert "secret" not in error["message"]
    record = next(r for r in caplog.records if r.name == "citewell.api")
    assert record.levelno == logging.ERROR
    assert record.exc_info and "secret" in str(record.exc_info[1])


def test_a_configuration_error_is_500_with_a_generic_message(settings: Settings) -> None:
    app = create_app(settings)

    def fail() -> None:
        raise ConfigError("the embedder at /opt/models is missing")

    app.dependency_overrides[get_principal] = fail
    with TestClient(app) as client:
        error = assert_error(client.get("/v1/buckets"), 500)
    assert "/opt/models" not in error["message"]
