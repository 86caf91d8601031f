"""Stores of buckets and sources. ``open_store`` picks the backend from the settings: PostgreSQL
when ``database_url`` is set, else the embedded store in the data folder; and either keeps its
originals where ``blobs.url`` says (``citewell.store.objects``)."""

from __future__ import annotations

from collections.abc import Callable

from citewell.config import Settings
from citewell.errors import ConfigError
from citewell.store.base import Retention, Store
from citewell.store.objects import open_objects
from citewell.store.objects.blobs import BlobStore
from citewell.store.sqlite import SQLiteStore

__all__ = ["Store", "open_store"]


def _retention(settings: Settings) -> Retention:
    privacy = settings.privacy
    return Retention(traces=privacy.trace_retention_days, answers=privacy.answer_retention_days)


def _sqlite(settings: Settings, embedder: str, dim: int) -> Store:
    return SQLiteStore(
        settings.data_dir,
        embedder=embedder,
        dim=dim,
        threads=settings.retrieve.threads,
        ann_threshold=settings.retrieve.ann_threshold,
        retention=_retention(settings),
        blobs=BlobStore(open_objects(settings, "blobs")),
    )


def _postgres(settings: Settings, embedder: str, dim: int) -> Store:
    try:
        from citewell.store.postgres import PostgresStore
    except ImportError as exc:
        raise ConfigError(
            f"CITEWELL_DATABASE_URL is set but PostgreSQL support is not installed ({exc}):"
            " pip install 'citewell[postgres]'"
        ) from exc
    assert settings.database_url is not None
    return PostgresStore(
        settings.database_url.get_secret_value(),
        settings.data_dir,
        embedder=embedder,
        dim=dim,
        connections=settings.postgres.connections,
        ef_search=settings.postgres.ef_search,
        exact_below=settings.postgres.exact_below,
        lexical_depth=settings.postgres.lexical_depth or None,
        lexical_pool=settings.postgres.lexical_pool,
        lexical_share=settings.postgres.lexical_share,
        index_memory=settings.postgres.index_memory,
        index_workers=settings.postgres.index_workers,
        retention=_retention(settings),
        blobs=BlobStore(open_objects(settings, "blobs")),
    )


_BACKENDS: dict[str, Callable[[Settings, str, int], Store]] = {
    "sqlite": _sqlite,
    "postgres": _postgres,
}


def open_store(settings: Settings, *, embedder: str, dim: int) -> Store:
    """Open the configured store, searching vectors made by the named embedder."""
    backend = "sqlite" if settings.database_url is None else "postgres"
    return _BACKENDS[backend](settings, embedder, dim)
