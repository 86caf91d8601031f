"""The PostgreSQL store's schema, as named migrations applied in order.

Each migration runs once, in one transaction, and is recorded in ``schema_migrations``. Several
processes may start at once: they take turns on one advisory lock, so each migration is applied
by exactly one of them and the others find it recorded. Never edit a migration that has shipped;
add the next one.
"""

from __future__ import annotations

from typing import LiteralString

import psycopg

__all__ = ["MIGRATIONS", "migrate", "schema_lock"]

_LOCK_KEY = int.from_bytes(b"citewell", "big") >> 1
"""The advisory lock (a positive bigint) held while the schema changes."""

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

        CREATE TABLE buckets (
            key        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id         text NOT NULL UNIQUE,
            tenant_id  text NOT NULL,
            slug       text NOT NULL,
            name       text NOT NULL,
            created_at timestamptz NOT NULL,
            UNIQUE (tenant_id, slug)
        );

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

        -- Content-addressed: a text embedded once is never embedded again by the same model.
        -- Each embedder's vectors get their own HNSW index when a store opens with it.
        CREATE TABLE vectors (
            embedder   text NOT NULL,
            vector_key text NOT NULL,
            vector     vector NOT NULL,
            PRIMARY KEY (embedder, vector_key)
        );

        CREATE TABLE answers (
            id           text PRIMARY KEY,  -- the id the client was given: resp_…
            tenant_id    text NOT NULL,
            answer_id    text NOT NULL,     -- Answer.id: ans_…
            created_at   timestamptz NOT NULL,
            answer       text NOT NULL,     -- the Answer, as JSON
            conversation jsonb NOT NULL,    -- [[role, text], ...]: the turns before it
            rendered     text NOT NULL,     -- the JSON object the client was sent
            previous_id  text,              -- the stored answer this one continues
            key_id       text
        );
        CREATE INDEX answers_by_created_at ON answers (created_at);
        CREATE TABLE answer_sources (
            source_id   text NOT NULL,
            response_id text NOT NULL REFERENCES answers (id) ON DELETE CASCADE,
            PRIMARY KEY (source_id, response_id)
        );
        CREATE INDEX answer_sources_by_response ON answer_sources (response_id);

        -- Each answer's trace: ids, offsets and support scores only, never text.
        CREATE TABLE traces (
            answer_id  text PRIMARY KEY,
            agent      text NOT NULL,
            created_at timestamptz NOT NULL,
            trace      text NOT NULL       -- the Trace, as JSON
        );
        CREATE INDEX traces_by_created_at ON traces (created_at);

        CREATE TABLE api_keys (
            id          text PRIMARY KEY,
            tenant_id   text NOT NULL REFERENCES tenants (id),
            name        text NOT NULL,
            secret_hash text NOT NULL,
            permissions text[] NOT NULL,
            bucket_ids  text[],             -- NULL: every bucket of the tenant
            acl_labels  text[],             -- NULL: every source
            created_at  timestamptz NOT NULL,
            revoked_at  timestamptz
        );
        CREATE INDEX api_keys_by_tenant ON api_keys (tenant_id);
        CREATE TABLE agents (
            tenant_id  text NOT NULL REFERENCES tenants (id),
            name       text NOT NULL,
            agent      text NOT NULL,       -- the Agent, as JSON
            created_at timestamptz NOT NULL,
            PRIMARY KEY (tenant_id, name)
        );
        """,
    ),
    (
        "0002_ingest_jobs",
        """
        -- Background ingests (Library.submit), here so that any server process can finish
        -- one whose process died. The file's bytes wait in the blob folder meanwhile.
        CREATE TABLE ingest_jobs (
            id             text PRIMARY KEY,  -- the id the source gets: src_…
            tenant_id      text NOT NULL,
            bucket_id      text NOT NULL,
            filename       text NOT NULL,
            mime_type      text NOT NULL,
            content_hash   text NOT NULL,
            byte_size      bigint NOT NULL,
            acl            text[] NOT NULL,
            metadata       jsonb NOT NULL,
            effective_date date,
            state          text NOT NULL,     -- queued, running, done, failed
            attempts       integer NOT NULL,  -- runs started
            lease_owner    text,              -- the process running it
            lease_expires  timestamptz,       -- when another process may take it over
            pages_done     integer NOT NULL,
            pages_total    integer NOT NULL,
            result_id      text,              -- once done: the source it ended with
            error          text,              -- once failed: why
            unreadable     boolean NOT NULL,  -- failed on the file itself
            created_at     timestamptz NOT NULL,
            updated_at     timestamptz NOT NULL
        );
        CREATE INDEX ingest_jobs_by_bucket ON ingest_jobs (bucket_id, content_hash);
        CREATE INDEX ingest_jobs_by_state ON ingest_jobs (state, lease_expires);
        CREATE INDEX ingest_jobs_by_content_hash ON ingest_jobs (content_hash);
        """,
    ),
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
