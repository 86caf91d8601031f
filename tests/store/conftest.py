"""Every store test that is about a Store's behaviour runs on each backend: ``backend`` opens
stores of one kind on one location (a folder, or a folder and a database)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from citewell.store.base import Store
from citewell.store.sqlite import SQLiteStore
from tests.contracts.store import DIM, EMBEDDER


class Backend:
    """Opens stores on one location, and runs SQL on it behind their back."""

    def __init__(self, name: str, folder: Path, database_url: str | None) -> None:
        self.name = name
        self.folder = folder
        self.database_url = database_url
        self._opened: list[Store] = []

    def open(self, **options: Any) -> Store:
        store: Store
        if self.database_url is None:
            store = SQLiteStore(self.folder, embedder=EMBEDDER, dim=DIM, **options)
        else:
            from citewell.store.postgres import PostgresStore

            store = PostgresStore(
                self.database_url, self.folder, embedder=EMBEDDER, dim=DIM, **options
            )
        self._opened.append(store)
        return store

    def sql(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one statement (``?`` placeholders) and commit; its rows."""
        if self.database_url is None:
            import sqlite3

            with sqlite3.connect(self.folder / "citewell.db") as db:
                rows = db.execute(query, params).fetchall()
            db.close()
            return rows
        import psycopg

        with psycopg.connect(self.database_url) as conn:
            cursor = conn.execute(query.replace("?", "%s"), params)  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []

    def close(self) -> None:
        for store in self._opened:
            store.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.integration)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    url = request.getfixturevalue("database_url") if request.param == "postgres" else None
    opened = Backend(request.param, tmp_path / "store", url)
    yield opened
    opened.close()


@pytest.fixture
def store(backend: Backend) -> Store:
    return backend.open()
