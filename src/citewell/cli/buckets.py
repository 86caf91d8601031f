"""Buckets: list, create, rename, delete, and export to one file or import back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import click

from citewell.cli.common import (
    RequestFailed,
    data_dir_option,
    echo_list,
    json_option,
    main,
    open_library,
    settings_from,
)


@main.group()
def buckets() -> None:
    """Create, list, rename and delete buckets."""


@buckets.command("list")
@json_option
@data_dir_option
def list_buckets(as_json: bool, data_dir: Path | None) -> None:
    """List the buckets."""
    from citewell.render.records import BucketObject

    with open_library(settings_from(data_dir)) as library:
        found = library.list_buckets()
    if as_json:
        echo_list([BucketObject.render(b) for b in found])
        return
    for bucket in found:
        click.echo(f"{bucket.slug}\t{bucket.id}\t{bucket.name}")


@buckets.command("create")
@click.argument("slug")
@click.option("--name", help="Human-readable name. [default: the slug]")
@data_dir_option
def create_bucket(slug: str, name: str | None, data_dir: Path | None) -> None:
    """Create a bucket (nothing happens if it exists)."""
    with open_library(settings_from(data_dir)) as library:
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
    with open_library(settings_from(data_dir)) as library:
        renamed = library.rename_bucket(bucket, slug=new_slug, name=name)
    click.echo(f"{renamed.slug}\t{renamed.id}\t{renamed.name}")


@buckets.command("delete")
@click.argument("bucket")
@data_dir_option
def delete_bucket(bucket: str, data_dir: Path | None) -> None:
    """Delete a bucket (by slug or id) with all its sources, at once."""
    with open_library(settings_from(data_dir)) as library:
        bucket_id = library.get_bucket(bucket).id
        library.delete_bucket(bucket_id)
    click.echo(f"deleted {bucket_id}")


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
    with open_library(settings_from(data_dir)) as library:
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
    with open_library(settings_from(data_dir)) as library, archive.open("rb") as file:
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
