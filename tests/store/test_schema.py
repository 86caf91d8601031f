"""Both databases hold one schema: the same tables and columns, each column of the same kind
(``citewell.store.tables``), apart from the few things in which the two stores really differ."""

from __future__ import annotations

import sqlite3

import pytest

from citewell.store import tables
from citewell.store.postgres import schema as postgres_schema
from citewell.store.sqlite import schema as sqlite_schema

ONLY_SQLITE = {
    "migrations": "its migration record",
    "meta": "the generation the lexical index was built at",
    "lexical_garbage": "sources still to remove from the tantivy index",
    "sources.status": "a source waits, invisible, for its ingest to finish",
    "sources.ingest_pid": "the process whose ingest that is",
}
ONLY_POSTGRES = {
    "schema_migrations": "its migration record",
    "lexical_terms": "BM25's document frequencies, kept by every write",
    "lexical_fields": "BM25's lengths per analyzer",
    "lexical_postings": "each chunk's terms, by what they add to its BM25 score",
    "chunks.lexical_field": "which analyzer read the chunk",
    "chunks.lexemes": "the chunk's terms, GIN-indexed",
    "chunks.lexical_length": "how many terms it has",
}

Columns = dict[str, list[tuple[str, str]]]


def sqlite_columns() -> Columns:
    db = sqlite3.connect(":memory:", isolation_level=None)
    sqlite_schema.migrate(db)
    names = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {
        table: [(row[1], row[2]) for row in db.execute(f"PRAGMA table_info({table})")]
        for (table,) in names
    }


def postgres_columns(database_url: str) -> tuple[Columns, dict[str, str]]:
    """The tables' columns with PostgreSQL's names of their types, and what each name in the
    vocabulary resolves to."""
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        postgres_schema.migrate(conn)
        rows = conn.execute(
            "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod)"
            " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
            " WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'"
            " AND a.attnum > 0 AND NOT a.attisdropped ORDER BY c.relname, a.attnum"
        ).fetchall()
        resolved = {
            kind: conn.execute("SELECT %s::regtype::text", (_type_name(name),)).fetchone()[0]
            for kind, name in tables.POSTGRES.items()
            if kind != "clustered"
        }
    columns: Columns = {}
    for table, column, type_name in rows:
        columns.setdefault(table, []).append((column, type_name))
    return columns, resolved


def _type_name(declaration: str) -> str:
    """``bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY`` → ``bigint``."""
    return declaration.split(" GENERATED")[0]


def shared(columns: Columns, only: dict[str, str]) -> Columns:
    return {
        table: [(name, kind) for name, kind in cols if f"{table}.{name}" not in only]
        for table, cols in columns.items()
        if table not in only
    }


@pytest.mark.integration
def test_both_databases_hold_the_same_tables_and_columns_in_the_same_order(
    database_url: str,
) -> None:
    in_sqlite = shared(sqlite_columns(), ONLY_SQLITE)
    in_postgres = shared(postgres_columns(database_url)[0], ONLY_POSTGRES)

    assert sorted(in_sqlite) == sorted(in_postgres)
    for table in in_sqlite:
        assert [name for name, _ in in_sqlite[table]] == [name for name, _ in in_postgres[table]]


@pytest.mark.integration
def test_each_column_is_of_one_kind_of_the_vocabulary_in_both_databases(
    database_url: str,
) -> None:
    postgres, resolved = postgres_columns(database_url)
    in_postgres = shared(postgres, ONLY_POSTGRES)
    kinds = {
        (_type_name(tables.SQLITE[kind]).split()[0], resolved[kind])
        for kind in tables.SQLITE
        if kind != "clustered"
    }

    pairs = {
        f"{table}.{name}": (sqlite_type, postgres_type)
        for table, cols in shared(sqlite_columns(), ONLY_SQLITE).items()
        for (name, sqlite_type), (_, postgres_type) in zip(cols, in_postgres[table], strict=True)
    }
    strays = {column: pair for column, pair in pairs.items() if pair not in kinds}
    assert strays == {}


def test_the_vocabulary_names_each_kind_in_both_databases() -> None:
    assert set(tables.SQLITE) == set(tables.POSTGRES)
    statement = "CREATE TABLE t (a {labels} NOT NULL, b {time}){clustered};"
    assert tables.render(statement, tables.SQLITE) == (
        "CREATE TABLE t (a TEXT NOT NULL, b TEXT) WITHOUT ROWID;"
    )
    assert tables.render(statement, tables.POSTGRES) == (
        "CREATE TABLE t (a text[] NOT NULL, b timestamptz);"
    )
