"""Filling buckets: ``ingest`` files and folders, list and delete sources."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from tqdm import tqdm

from citewell.cli.common import (
    EXIT_FAILED,
    echo_json,
    echo_records,
    json_option,
    main,
    with_library,
)
from citewell.errors import CitewellError, NotFound
from citewell.model import MetadataValue, Source
from citewell.progress import Progress

if TYPE_CHECKING:
    from citewell.library import Library


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--bucket", required=True, help="Slug or id of the bucket to ingest into.")
@click.option(
    "--create/--no-create",
    default=True,
    show_default=True,
    help="Create the bucket if it does not exist.",
)
@click.option("--acl", multiple=True, metavar="LABEL", help="An ACL label (repeatable).")
@click.option(
    "--metadata",
    multiple=True,
    metavar="KEY=VALUE",
    help="An attribute for filters (repeatable). VALUE is read as a number or true/false "
    "when it is one, else as text.",
    callback=lambda _context, _param, items: dict(_attribute(item) for item in items),
)
@click.option(
    "--effective-date",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="Date from which the content applies (YYYY-MM-DD).",
)
@json_option
@with_library
def ingest(
    paths: tuple[Path, ...],
    bucket: str,
    create: bool,
    acl: tuple[str, ...],
    metadata: dict[str, MetadataValue],
    effective_date: dt.datetime | None,
    as_json: bool,
    library: Library,
) -> None:
    """Ingest files into a bucket; directories are read recursively.

    Prints one line per file (created, new_version, unchanged, or failed with the reason).
    Hidden files and folders (names starting with a dot) are skipped.
    """
    from citewell.render.records import IngestResponse

    files, failures = _walk(paths)
    options: dict[str, Any] = {
        "acl": frozenset(acl),
        "metadata": metadata,
        "effective_date": effective_date.date() if effective_date else None,
    }
    records: list[dict[str, Any]] = []
    counts: dict[str, int] = {}

    def report(path: Path, record: dict[str, Any], line: str) -> None:
        records.append({"path": str(path), **record})
        counts[record["outcome"]] = counts.get(record["outcome"], 0) + 1
        if not as_json:
            tqdm.write(line, file=sys.stdout)

    for path, reason in failures:
        report(path, {"outcome": "failed", "error": reason}, f"{path}: failed: {reason}")
    try:
        target = library.get_bucket(bucket)
    except NotFound:
        if not create:
            raise
        target = library.create_bucket(bucket)
    ingested = Progress("ingesting", len(files), unit="files")
    for done, path in enumerate(files, 1):
        pages = _PageProgress(path)
        try:
            result = library.ingest_path(path, bucket=target.id, progress=pages, **options)
        except Exception as exc:  # one bad file must not stop the others
            reason = _reason(exc)
            report(path, {"outcome": "failed", "error": reason}, f"{path}: failed: {reason}")
            ingested.update_to(done)
            continue
        finally:
            pages.close()
        record = IngestResponse.render(result).model_dump(mode="json")
        source = result.source
        line = f"{path}: {result.outcome.value} ({source.id}, version {source.version})"
        report(path, record, line)
        ingested.update_to(done)
    ingested.close()
    if as_json:
        echo_json(records)
    summary = "".join(f", {n} {outcome}" for outcome, n in sorted(counts.items()))
    click.echo(f"{len(records)} file{'s' if len(records) != 1 else ''}{summary}", err=True)
    if counts.get("failed"):
        sys.exit(EXIT_FAILED)


class _PageProgress:
    """Under the files' progress, the pages of a file read with OCR (if any)."""

    def __init__(self, path: Path) -> None:
        self._name = path.name
        self._pages: Progress | None = None

    def __call__(self, done: int, total: int) -> None:
        if self._pages is None and total:
            self._pages = Progress(f"OCR {self._name}", total, unit="pages", position=1)
        if self._pages is not None:
            self._pages.update_to(done, total)

    def close(self) -> None:
        if self._pages is not None:
            self._pages.close()


def _walk(paths: Sequence[Path]) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The files under ``paths`` in a stable order, and the folders that could not be read."""
    files: list[Path] = []
    failures: list[tuple[Path, str]] = []

    def unreadable(exc: OSError) -> None:
        failures.append((Path(exc.filename), _reason(exc)))

    for path in paths:
        if not path.is_dir():
            files.append(path)  # a missing or unreadable file is reported when it is ingested
            continue
        for folder, dirs, names in os.walk(path, onerror=unreadable):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            files.extend(Path(folder, n) for n in sorted(names) if not n.startswith("."))
    return files, failures


def _reason(exc: BaseException) -> str:
    if isinstance(exc, CitewellError):
        return exc.message
    if isinstance(exc, OSError) and exc.strerror:
        return f"cannot read the file: {exc.strerror.lower()}"
    return f"unexpected error: {type(exc).__name__}: {exc}"


def _attribute(item: str) -> tuple[str, MetadataValue]:
    key, sep, raw = item.partition("=")
    if not sep or not key:
        raise click.BadParameter(f"{item!r} is not KEY=VALUE")
    try:
        value = json.loads(raw)
    except ValueError:
        return key, raw
    return key, value if isinstance(value, int | float | bool) else raw


@main.group()
def sources() -> None:
    """List and delete the sources of a bucket."""


@sources.command("list")
@click.option("--bucket", required=True, help="Slug or id of the bucket.")
@click.option("--include-superseded", is_flag=True, help="List older versions of files too.")
@json_option
@with_library
def list_sources(bucket: str, include_superseded: bool, as_json: bool, library: Library) -> None:
    """List the sources of a bucket: id, version, file name, media type."""
    from citewell.render.records import SourceObject

    found = library.list_sources(bucket, include_superseded=include_superseded)
    echo_records(found, as_json, SourceObject.render, _source_line)


def _source_line(source: Source) -> str:
    state = "" if source.is_current else f"\tsuperseded by {source.superseded_by}"
    return f"{source.id}\tv{source.version}\t{source.filename}\t{source.mime_type}{state}"


@sources.command("delete")
@click.argument("source_id")
@with_library
def delete_source(source_id: str, library: Library) -> None:
    """Delete one version of a file."""
    library.delete_source(source_id)
    click.echo(f"deleted {source_id}")
