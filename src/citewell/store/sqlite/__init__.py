"""The embedded store: SQLite for what is stored, tantivy for BM25, vectors in memory."""

from citewell.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
