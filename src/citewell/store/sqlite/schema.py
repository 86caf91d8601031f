"""The embedded store's SQLite schema, as named migrations applied in order.

Each migration runs once, in one transaction, and is recorded in ``migrations`` (the pattern of
sqlite-utils). Never edit a migration that has shipped; add the next one.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from citewell.store import tables

__all__ = ["MIGRATIONS", "migrate"]

_SOURCE_COLUMNS = """
            key            INTEGER PRIMARY KEY,
            id             TEXT NOT NULL UNIQUE,
            bucket_key     INTEGER NOT NULL REFERENCES buckets (key) ON DELETE CASCADE,
            filename       TEXT NOT NULL,
            mime_type      TEXT NOT NULL,
            content_hash   TEXT NOT NULL,
            byte_size      INTEGER NOT NULL,
            version        INTEGER NOT NULL,
            supersedes     TEXT,
            superseded_by  TEXT,
            status         TEXT NOT NULL,
            ingest_pid     INTEGER,
            title          TEXT,
            language       TEXT,
            modality       TEXT NOT NULL,
            page_count     INTEGER,
            char_count     INTEGER NOT NULL,
            chunk_count    INTEGER NOT NULL,
            effective_date TEXT,
            acl            TEXT NOT NULL,   -- JSON array of labels, sorted
            metadata       TEXT NOT NULL,   -- JSON object
            created_at     TEXT NOT NULL,
            text           TEXT NOT NULL"""
"""The columns of ``sources``: SQLite changes a table's constraints only by building it anew."""


def _shared(statement: str) -> str:
    return tables.render(statement, tables.SQLITE)


MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "0001_initial",
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('generation', '0');
        """
        + _shared(tables.BUCKETS)
        + f"""
        -- A source is visible only once status = 'ready'. Rows in 'pending' belong to an ingest
        -- in progress (ingest_pid); after a crash they are removed at the next open.
        CREATE TABLE sources ({_SOURCE_COLUMNS},
            UNIQUE (bucket_key, content_hash)
        );
        CREATE INDEX sources_by_filename ON sources (bucket_key, filename, superseded_by);
        CREATE INDEX sources_by_status ON sources (status);

        CREATE TABLE pages (
            source_key INTEGER NOT NULL REFERENCES sources (key) ON DELETE CASCADE,
            number     INTEGER NOT NULL,
            label      TEXT,
            start      INTEGER NOT NULL,
            end        INTEGER NOT NULL,
            width      REAL NOT NULL,
            height     REAL NOT NULL,
            modality   TEXT NOT NULL,
            boxes      BLOB NOT NULL,       -- zlib of float32 (n, 4), one row per code point
            PRIMARY KEY (source_key, number)
        );

        CREATE TABLE chunks (
            key          INTEGER PRIMARY KEY,
            id           TEXT NOT NULL UNIQUE,
            source_key   INTEGER NOT NULL REFERENCES sources (key) ON DELETE CASCADE,
            idx          INTEGER NOT NULL,
            start        INTEGER NOT NULL,
            end          INTEGER NOT NULL,
            heading_path TEXT NOT NULL,     -- JSON array
            page_numbers TEXT NOT NULL,     -- JSON array
            sentences    TEXT NOT NULL,     -- JSON array of [start, end]
            language     TEXT,
            vector_key   TEXT NOT NULL
        );
        CREATE INDEX chunks_by_source ON chunks (source_key, idx);
        CREATE INDEX chunks_by_vector_key ON chunks (vector_key);
        """
        + _shared(tables.VECTORS)
        + """
        -- Sources whose documents must still be removed from the lexical index. Written in the
        -- same transaction that removes (or abandons) the source, cleared once the index agrees.
        CREATE TABLE lexical_garbage (source_key INTEGER PRIMARY KEY);
        """,
    ),
    (
        "0002_answers",
        _shared(tables.ANSWERS),
    ),
    ("0003_traces", _shared(tables.TRACES)),
    (
        "0004_answer_sources",
        _shared(tables.ANSWER_SOURCES)
        + """
        ALTER TABLE answers ADD COLUMN previous_id TEXT;  -- the stored answer this one continues

        INSERT OR IGNORE INTO answer_sources (source_id, response_id)
        SELECT json_extract(p.value, '$.source.id'), a.id
            FROM answers a, json_each(a.answer, '$.passages') p
        UNION SELECT json_extract(s.value, '$.source.id'), a.id
            FROM answers a, json_each(a.answer, '$.sources') s
        UNION SELECT json_extract(c.value, '$.source_id'), a.id
            FROM answers a, json_each(a.answer, '$.citations') c;
        """,
    ),
    (
        "0005_tenants",
        """
        -- Workspaces, their agents, and the API keys that act in them.
        CREATE TABLE tenants (
            id         TEXT PRIMARY KEY,
            name       TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        INSERT INTO tenants VALUES ('default', 'Default', strftime('%Y-%m-%dT%H:%M:%f+00:00'));
        """
        + _shared(tables.API_KEYS)
        + _shared(tables.AGENTS),
    ),
    (
        "0006_answer_keeping",
        """
        -- Stored answers hold text: they are dropped after the retention, oldest first, and
        -- read again only by the key that asked (or one that sees everything of the tenant).
        CREATE INDEX answers_by_created_at ON answers (created_at);
        ALTER TABLE answers ADD COLUMN key_id TEXT;
        """,
    ),
    (
        "0007_ocr_confidence",
        """
        -- How sure OCR was of a page's words (NULL where the text layer was read).
        ALTER TABLE pages ADD COLUMN ocr_confidence REAL;
        """,
    ),
    (
        "0008_ocr_word_confidences",
        """
        -- How sure OCR was of each word: zlib of uint8, one per code point of the page (255
        -- between words), NULL where OCR did not read the page.
        ALTER TABLE pages ADD COLUMN confidences BLOB;
        """,
    ),
    (
        "0009_ingest_jobs",
        _shared(tables.INGEST_JOBS),
    ),
    (
        "0010_sources_per_labels",
        f"""
        -- The same bytes may be held twice in a bucket under different ACL labels: a key that
        -- cannot see one copy stores its own, and learns nothing of the other. SQLite drops a
        -- table constraint only by rebuilding the table (migrate runs without foreign keys).
        CREATE TABLE sources_rebuilt ({_SOURCE_COLUMNS}
        );
        INSERT INTO sources_rebuilt SELECT * FROM sources;
        DROP TABLE sources;
        ALTER TABLE sources_rebuilt RENAME TO sources;
        CREATE UNIQUE INDEX sources_by_content ON sources (bucket_key, content_hash, acl);
        CREATE INDEX sources_by_filename ON sources (bucket_key, filename, superseded_by);
        CREATE INDEX sources_by_status ON sources (status);

        -- What the submitter of a background ingest sees (JSON array; NULL: every label): the
        -- job stores, deduplicates and supersedes only within that.
        ALTER TABLE ingest_jobs ADD COLUMN submitter_labels TEXT;
        """,
    ),
    (
        "0011_offset_columns",
        """
        -- PostgreSQL's names (END is reserved there), so both stores share one set of column
        -- names and the statements that read them.
        ALTER TABLE pages RENAME COLUMN start TO start_offset;
        ALTER TABLE pages RENAME COLUMN end TO end_offset;
        ALTER TABLE chunks RENAME COLUMN start TO start_offset;
        ALTER TABLE chunks RENAME COLUMN end TO end_offset;
        """,
    ),
)


def migrate(conn: sqlite3.Connection) -> None:
    """Apply every migration not yet recorded, each in its own transaction.

    ``conn`` must be in autocommit mode (isolation_level=None). Safe when several processes open
    the same store at once: the check and the migration share one IMMEDIATE transaction.
    """
    conn.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    # SQLite's way to rebuild a table: foreign keys off (only outside a transaction), and
    # checked before each commit.
    enforced = conn.execute("PRAGMA foreign_keys").fetchone()[0]
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        for name, script in MIGRATIONS:
            _apply(conn, name, script)
    finally:
        conn.execute(f"PRAGMA foreign_keys = {'ON' if enforced else 'OFF'}")


def _apply(conn: sqlite3.Connection, name: str, script: str) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("SELECT 1 FROM migrations WHERE name = ?", (name,)).fetchone() is None:
            for statement in _statements(script):
                conn.execute(statement)
            if conn.execute("PRAGMA foreign_key_check").fetchone() is not None:
                raise sqlite3.IntegrityError(f"migration {name} breaks a foreign key")
            now = datetime.now(UTC).isoformat()
            conn.execute("INSERT INTO migrations VALUES (?, ?)", (name, now))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _statements(script: str) -> list[str]:
    """Split a script into statements (``executescript`` would commit our transaction)."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip() and not all(
        part.strip().startswith("--") for part in current.strip().splitlines()
    ):
        raise ValueError(f"incomplete SQL statement in migration: {current!r}")
    return statements
