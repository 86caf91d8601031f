"""What every command shares: the ``citewell`` group, the options every command takes, how
settings are read, how a library is opened, and how errors become exit codes."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from pydantic import ValidationError

import citewell
from citewell.config import Settings
from citewell.errors import CitewellError, ConfigError, StoreError

if TYPE_CHECKING:
    from citewell.engine import Engine
    from citewell.library import Library
    from citewell.render.records import WireObject

__all__ = [
    "EXIT_FAILED",
    "EXIT_SETUP",
    "RequestFailed",
    "SetupFailed",
    "data_dir_option",
    "echo_json",
    "echo_records",
    "json_option",
    "main",
    "open_engine",
    "open_library",
    "reported",
    "settings_from",
    "with_engine",
    "with_library",
]

EXIT_FAILED = 1
EXIT_SETUP = 3

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")


class RequestFailed(click.ClickException):
    """The request failed; printed as ``Error: <message>``."""

    exit_code = EXIT_FAILED


class SetupFailed(click.ClickException):
    """A setting is wrong or the store is unavailable."""

    exit_code = EXIT_SETUP


@contextmanager
def reported() -> Iterator[None]:
    """citewell's errors, as messages with their exit code instead of tracebacks."""
    try:
        yield
    except (ConfigError, StoreError) as exc:
        raise SetupFailed(exc.message) from exc
    except CitewellError as exc:
        raise RequestFailed(exc.message) from exc


def settings_from(data_dir: Path | None, **overrides: Any) -> Settings:
    """Settings from ``CITEWELL_*`` variables, with the command line's values on top."""
    if data_dir is not None:
        overrides["data_dir"] = data_dir
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise SetupFailed(f"invalid settings: {exc}") from exc


@contextmanager
def open_library(settings: Settings) -> Iterator[Library]:
    from citewell.library import Library  # loads the parsers and the embedder: only when needed

    with reported(), Library.open(settings) as library:
        yield library


@contextmanager
def open_engine(settings: Settings) -> Iterator[Engine]:
    """The engine of the library ``settings`` describe, with the configured agents."""
    from citewell.engine import Engine

    with open_library(settings) as library:
        yield Engine.open(library)


def data_dir_option(command: F) -> F:
    return click.option(
        "--data-dir",
        type=click.Path(file_okay=False, path_type=Path),
        envvar="CITEWELL_DATA_DIR",
        show_envvar=True,
        help="Folder holding citewell's data. [default: a per-user data folder]",
    )(command)


def json_option(command: F) -> F:
    return click.option(
        "--json", "as_json", is_flag=True, help="Print JSON, the same objects as the HTTP API."
    )(command)


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


def echo_records(
    records: Sequence[R],
    as_json: bool,
    render: Callable[[R], WireObject],
    line: Callable[[R], str],
) -> None:
    """Print records one ``line`` each, or (``--json``) rendered in the list envelope the HTTP
    API lists them in."""
    if not as_json:
        for record in records:
            click.echo(line(record))
        return
    from citewell.render.records import ListObject, WireObject

    page = ListObject[WireObject].of([render(record) for record in records])
    echo_json(page.model_dump(mode="json", serialize_as_any=True))


def _given(
    name: str, opener: Callable[[Settings], AbstractContextManager[Any]]
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A decorator: the command takes ``--data-dir`` and is given, as ``name``, what ``opener``
    opens on that folder's settings, open while it runs."""

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        @data_dir_option
        @functools.wraps(command)
        def run(*args: Any, data_dir: Path | None, **kwargs: Any) -> None:
            with opener(settings_from(data_dir)) as opened:
                command(*args, **{name: opened}, **kwargs)

        return run

    return decorate


with_library = _given("library", open_library)
"""The command is given ``library``: the library of ``--data-dir``."""
with_engine = _given("engine", open_engine)
"""The command is given ``engine``: the library's engine, with the configured agents."""


@click.group()
@click.version_option(citewell.__version__, prog_name="citewell")
def main() -> None:
    """Grounded answers over your own documents, with exact citations."""
