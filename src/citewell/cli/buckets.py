"""Buckets: list, create, rename, delete, and export to one file or import back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING

import click

from citewell.cli.common import RequestFailed, echo_records, json_option, main, with_library

if TYPE_CHECKING:
    from citewell.library import Library
    from citewell.model import Bucket


@main.group()
def buckets() -> None:
    """Create, list, rename and delete buckets."""


@buckets.command("list")
@json_option
@with_library
def list_buckets(as_json: bool, library: Library) -> None:
    """List the buckets."""
    from citewell.render.records import BucketObject

    echo_records(library.list_buckets(), as_json, BucketObject.render, _bucket_line)


@buckets.command("create")
@click.argument("slug")
@click.option("--name", help="Human-readable name. [default: the slug]")
@with_library
def create_bucket(slug: str, name: str | None, library: Library) -> None:
    """Create a bucket (nothing happens if it exists)."""
    click.echo(_bucket_line(library.create_bucket(slug, name=name)))


@buckets.command("rename")
@click.argument("bucket")
@click.option("--slug", "new_slug", help="New slug. [default: kept]")
@click.option("--name", help="New human-readable name. [default: kept]")
@with_library
def rename_bucket(bucket: str, new_slug: str | None, name: str | None, library: Library) -> None:
    """Give a bucket (by slug or id) a new slug and/or name."""
    click.echo(_bucket_line(library.rename_bucket(bucket, slug=new_slug, name=name)))


@buckets.command("delete")
@click.argument("bucket")
@with_library
def delete_bucket(bucket: str, library: Library) -> None:
    """Delete a bucket (by slug or id) with all its sources, at once."""
    bucket_id = library.get_bucket(bucket).id
    library.delete_bucket(bucket_id)
    click.echo(f"deleted {bucket_id}")


def _bucket_line(bucket: Bucket) -> str:
    return f"{bucket.slug}\t{bucket.id}\t{bucket.name}"


@main.command()
@click.argument("bucket")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="File written. [default: SLUG.citewell.zip]",
)
@with_library
def export(bucket: str, output: Path | None, library: Library) -> None:
    """Write a bucket's archive: its original files and a manifest, for `citewell import`."""
    found = library.get_bucket(bucket)
    target = output or Path(f"{found.slug}.citewell.zip")
    with _written(target) as file:
        manifest = library.export_bucket(found.id, file)
    click.echo(f"exported {len(manifest.sources)} sources of {found.slug} to {target}")


@main.command("import")
@click.argument("archive", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--bucket", "slug", help="Slug of the new bucket. [default: the archive's]")
@with_library
def import_(archive: Path, slug: str | None, library: Library) -> None:
    """Create a bucket from an archive written by `citewell export`."""
    with archive.open("rb") as file:
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
