"""The scale-out store: PostgreSQL with pgvector, shared by every server process."""

from citewell.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
