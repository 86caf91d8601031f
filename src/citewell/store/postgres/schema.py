"""The PostgreSQL store's schema, as named migrations applied in order.

Each migration runs once, in one transaction, and is recorded in ``schema_migrations``. Several
processes may start at once: they take turns on one advisory lock, so each migration is applied
by exactly one of them and the others find it recorded. Never edit a migration that has shipped;
add the next one.
"""

from __future__ import annotations

from typing import LiteralString

import psycopg

from citewell.store import tables

__all__ = ["MIGRATIONS", "migrate", "schema_lock"]

_LOCK_KEY = int.from_bytes(b"citewell", "big") >> 1
"""The advisory lock (a positive bigint) held while the schema changes."""


def _shared(statement: LiteralString) -> LiteralString:
    return tables.render(statement, tables.POSTGRES)


MIGRATIONS: tuple[tuple[str, LiteralString], ...] = (
    (
        "0001_initial",
        """
        CREATE EXTENSION IF NOT EXISTS vector;

        CREATE TABLE tenants (
            id         text PRIMARY KEY,
            name       text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        INSERT INTO tenants (id, name) VALUES ('default', 'Default');

        """
        + _shared(tables.BUCKETS)
        + """
        -- A source is written, with everything derived from it, in one transaction: there is no
        -- pending state to recover from.
        CREATE TABLE sources (
            key            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id             text NOT NULL UNIQUE,
            bucket_key     bigint NOT NULL REFERENCES buckets (key) ON DELETE CASCADE,
            filename       text NOT NULL,
            mime_type      text NOT NULL,
            content_hash   text NOT NULL,
            byte_size      bigint NOT NULL,
            version        integer NOT NULL,
            supersedes     text,
            superseded_by  text,
            title          text,
            language       text,
            modality       text NOT NULL,
            page_count     integer,
            char_count     integer NOT NULL,
            chunk_count    integer NOT NULL,
            effective_date date,
            acl            text[] NOT NULL,
            metadata       jsonb NOT NULL,
            created_at     timestamptz NOT NULL,
            text           text NOT NULL,
            UNIQUE (bucket_key, content_hash)
        );
        CREATE INDEX sources_by_filename ON sources (bucket_key, filename)
            WHERE superseded_by IS NULL;
        CREATE INDEX sources_by_content_hash ON sources (content_hash);

        CREATE TABLE pages (
            source_key     bigint NOT NULL REFERENCES sources (key) ON DELETE CASCADE,
            number         integer NOT NULL,
            label          text,
            start_offset   integer NOT NULL,
            end_offset     integer NOT NULL,
            width          double precision NOT NULL,
            height         double precision NOT NULL,
            modality       text NOT NULL,
            boxes          bytea NOT NULL,  -- zlib of float32 (n, 4), one row per code point
            ocr_confidence double precision,
            confidences    bytea,           -- zlib of uint8, one per code point; NULL: no OCR
            PRIMARY KEY (source_key, number)
        );

        -- lexemes: the chunk's terms as citewell's analyzers make them (citewell/analysis.py),
        -- each prefixed with its analyzer's name, and each with as many positions as it occurs
        -- (at most 256: tsvector's limit); lexical_length: how many terms it has in all.
        CREATE TABLE chunks (
            key            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id             text NOT NULL UNIQUE,
            source_key     bigint NOT NULL REFERENCES sources (key) ON DELETE CASCADE,
            idx            integer NOT NULL,
            start_offset   integer NOT NULL,
            end_offset     integer NOT NULL,
            heading_path   jsonb NOT NULL,
            page_numbers   jsonb NOT NULL,
            sentences      jsonb NOT NULL,  -- [[start, end], ...]
            language       text,
            vector_key     text NOT NULL,
            lexical_field  text NOT NULL,
            lexemes        tsvector NOT NULL,
            lexical_length integer NOT NULL
        );
        CREATE INDEX chunks_by_source ON chunks (source_key, idx);
        CREATE INDEX chunks_by_vector_key ON chunks (vector_key);
        CREATE INDEX chunks_lexemes ON chunks USING gin (lexemes);

        -- BM25's statistics, kept up to date by every write: per term, the chunks holding it;
        -- per analyzer, its chunks and their terms in all.
        CREATE TABLE lexical_terms (
            lexeme text PRIMARY KEY,
            chunks bigint NOT NULL
        );
        CREATE TABLE lexical_fields (
            field  text PRIMARY KEY,
            chunks bigint NOT NULL,
            terms  bigint NOT NULL
        );

        -- Each embedder's vectors get their own HNSW index when a store opens with it.
        """
        + _shared(tables.VECTORS)
        + _shared(tables.ANSWERS)
        + """
        ALTER TABLE answers ADD COLUMN previous_id text;  -- the stored answer this one continues
        ALTER TABLE answers ADD COLUMN key_id text;
        CREATE INDEX answers_by_created_at ON answers (created_at);
        """
        + _shared(tables.ANSWER_SOURCES)
        + _shared(tables.TRACES)
        + _shared(tables.API_KEYS)
        + _shared(tables.AGENTS),
    ),
    ("0002_ingest_jobs", _shared(tables.INGEST_JOBS)),
    (
        "0003_sources_per_labels",
        """
        -- The same bytes may be held twice in a bucket under different ACL labels: a key that
        -- cannot see one copy stores its own, and learns nothing of the other.
        ALTER TABLE sources DROP CONSTRAINT sources_bucket_key_content_hash_key;
        CREATE UNIQUE INDEX sources_by_content ON sources (bucket_key, content_hash, acl);

        -- What the submitter of a background ingest sees (NULL: every label): the job stores,
        -- deduplicates and supersedes only within that.
        ALTER TABLE ingest_jobs ADD COLUMN submitter_labels text[];
        """,
    ),
    (
        "0004_lexical_postings",
        """
        -- What one term adds to one chunk's BM25 score, over the term's idf: its saturated term
        -- frequency (tantivy's k1 = 1.2, b = 0.75; ``average`` is the field's terms over all
        -- chunks, as tantivy has it). The one definition, for storing and for scoring.
        CREATE FUNCTION bm25_impact(occurrences integer, length integer, average float8)
            RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE
            RETURN occurrences * 2.2::float8
                / (occurrences + 1.2::float8 * (0.25::float8 + 0.75::float8 * length / average));

        -- The average length the stored impacts were computed with (``lexical_postings``),
        -- renewed when the field's true average drifts too far from it.
        ALTER TABLE lexical_fields ADD COLUMN impact_length float8;
        UPDATE lexical_fields SET impact_length
            = terms / nullif((SELECT sum(chunks) FROM lexical_fields), 0);

        -- Every chunk's terms again, one row per term, so that a search reads each query term's
        -- chunks best first (by impact) and stops after a fixed number, however many chunks
        -- hold the term. term: hashtextextended(lexeme, 0); occurrences: as in the tsvector.
        CREATE TABLE lexical_postings (
            term        bigint NOT NULL,
            impact      real NOT NULL,
            chunk_key   bigint NOT NULL,
            source_key  bigint NOT NULL,
            occurrences smallint NOT NULL
        );
        INSERT INTO lexical_postings
            SELECT hashtextextended(u.lexeme, 0),
                   bm25_impact(cardinality(u.positions), c.lexical_length, f.impact_length),
                   c.key, c.source_key, cardinality(u.positions)
            FROM chunks c JOIN lexical_fields f ON f.field = c.lexical_field,
                 unnest(c.lexemes) u;
        CREATE INDEX lexical_postings_by_impact
            ON lexical_postings (term, impact DESC) INCLUDE (chunk_key, source_key);
        CREATE INDEX lexical_postings_by_source ON lexical_postings (source_key);
        """,
    ),
)


def schema_lock(conn: psycopg.Connection[object]) -> None:
    """Wait for, and hold until the transaction ends, the lock on schema changes."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))


def migrate(conn: psycopg.Connection[object]) -> None:
    """Apply every migration not yet recorded, each in its own transaction."""
    with conn.transaction():
        schema_lock(conn)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations"
            " (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
    for name, script in MIGRATIONS:
        with conn.transaction():
            schema_lock(conn)
            done = conn.execute("SELECT 1 FROM schema_migrations WHERE name = %s", (name,))
            if done.fetchone() is None:
                conn.execute(script)
                conn.execute("INSERT INTO schema_migrations (name) VALUES (%s)", (name,))
