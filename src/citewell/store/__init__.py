"""Stores of buckets and sources. ``open_store`` picks the backend from the settings."""

from __future__ import annotations

from collections.abc import Callable

from citewell.config import Settings
from citewell.store.base import Store
from citewell.store.sqlite import SQLiteStore

__all__ = ["Store", "open_store"]


def _sqlite(settings: Settings, embedder: str, dim: int) -> Store:
    return SQLiteStore(
        settings.data_dir,
        embedder=embedder,
        dim=dim,
        threads=settings.retrieve.threads,
        ann_threshold=settings.retrieve.ann_threshold,
        trace_retention_days=settings.privacy.trace_retention_days,
        answer_retention_days=settings.privacy.answer_retention_days,
    )


_BACKENDS: dict[str, Callable[[Settings, str, int], Store]] = {"sqlite": _sqlite}


def open_store(settings: Settings, *, embedder: str, dim: int) -> Store:
    """Open the configured store, searching vectors made by the named embedder."""
    return _BACKENDS["sqlite"](settings, embedder, dim)
