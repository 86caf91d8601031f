"""The tables both databases hold, written once.

Each statement names its columns' types by what they hold (``{text}``, ``{labels}``, ``{time}``
…), and each database's schema renders it with ``render``: SQLite keeps lists and objects as
JSON text and times as fixed-width UTC text; PostgreSQL as ``text[]``, ``jsonb`` and
``timestamptz``. Where the two databases really differ (how a source waits for its ingest, how
chunks are indexed for lexical search), each schema writes its own statement.

A statement here is part of the migrations that first ran it: never edit one that has shipped;
add the next migration to each schema's history.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import LiteralString

__all__ = [
    "AGENTS",
    "ANSWERS",
    "ANSWER_SOURCES",
    "API_KEYS",
    "BUCKETS",
    "INGEST_JOBS",
    "POSTGRES",
    "SQLITE",
    "TRACES",
    "VECTORS",
    "render",
]

SQLITE: Mapping[str, LiteralString] = {
    "key": "INTEGER PRIMARY KEY",
    "text": "TEXT",
    "int": "INTEGER",
    "bigint": "INTEGER",
    "flag": "INTEGER",
    "real": "REAL",
    "bytes": "BLOB",
    "vector": "BLOB",  # float32
    "json": "TEXT",  # JSON
    "labels": "TEXT",  # JSON array
    "time": "TEXT",  # UTC, fixed width: sorts as text
    "date": "TEXT",
    "clustered": " WITHOUT ROWID",  # a table that is its primary key
}
POSTGRES: Mapping[str, LiteralString] = {
    "key": "bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    "text": "text",
    "int": "integer",
    "bigint": "bigint",
    "flag": "boolean",
    "real": "double precision",
    "bytes": "bytea",
    "vector": "vector",
    "json": "jsonb",
    "labels": "text[]",
    "time": "timestamptz",
    "date": "date",
    "clustered": "",
}


def render(statement: LiteralString, types: Mapping[str, LiteralString]) -> LiteralString:
    """``statement`` with each ``{type}`` named by one database's ``types``."""
    return statement.format_map(types)


BUCKETS: LiteralString = """
    CREATE TABLE buckets (
        key        {key},
        id         {text} NOT NULL UNIQUE,
        tenant_id  {text} NOT NULL,
        slug       {text} NOT NULL,
        name       {text} NOT NULL,
        created_at {time} NOT NULL,
        UNIQUE (tenant_id, slug)
    );
"""

VECTORS: LiteralString = """
    -- Content-addressed: a text embedded once is never embedded again by the same model.
    CREATE TABLE vectors (
        embedder   {text} NOT NULL,
        vector_key {text} NOT NULL,
        vector     {vector} NOT NULL,
        PRIMARY KEY (embedder, vector_key)
    );
"""

ANSWERS: LiteralString = """
    -- Answers as the API sent them, so that a client can read one again by its id
    -- (GET /v1/responses/{{id}}) and continue the conversation from it.
    CREATE TABLE answers (
        id           {text} PRIMARY KEY,  -- the id the client was given: resp_…
        tenant_id    {text} NOT NULL,
        answer_id    {text} NOT NULL,     -- Answer.id: ans_…
        created_at   {time} NOT NULL,
        answer       {text} NOT NULL,     -- the Answer, as JSON
        conversation {json} NOT NULL,     -- [[role, text], ...]: the turns before it
        rendered     {text} NOT NULL      -- the JSON object the client was sent
    );
"""

ANSWER_SOURCES: LiteralString = """
    -- The sources each stored answer holds text of: those it cites, lists or retrieved as
    -- passages, and those of the answer it continues (its conversation quotes that one).
    -- Deleting a source deletes these answers with it: a deleted text is never read back.
    CREATE TABLE answer_sources (
        source_id   {text} NOT NULL,  -- src_…
        response_id {text} NOT NULL REFERENCES answers (id) ON DELETE CASCADE,
        PRIMARY KEY (source_id, response_id)
    ){clustered};
    CREATE INDEX answer_sources_by_response ON answer_sources (response_id);
"""

TRACES: LiteralString = """
    -- Each answer's trace: ids, offsets and support scores only. Never the question, the
    -- answer or cited text. Rows older than the retention setting are deleted.
    CREATE TABLE traces (
        answer_id  {text} PRIMARY KEY,  -- Answer.id: ans_…
        agent      {text} NOT NULL,
        created_at {time} NOT NULL,
        trace      {text} NOT NULL      -- the Trace, as JSON
    );
    CREATE INDEX traces_by_created_at ON traces (created_at);
"""

API_KEYS: LiteralString = """
    -- A key's secret is never stored, only its SHA-256 (the secret is 32 random bytes: a slow
    -- hash would add nothing).
    CREATE TABLE api_keys (
        id          {text} PRIMARY KEY,
        tenant_id   {text} NOT NULL REFERENCES tenants (id),
        name        {text} NOT NULL,
        secret_hash {text} NOT NULL,
        permissions {labels} NOT NULL,
        bucket_ids  {labels},           -- NULL: every bucket of the tenant
        acl_labels  {labels},           -- NULL: every source
        created_at  {time} NOT NULL,
        revoked_at  {time}
    );
    CREATE INDEX api_keys_by_tenant ON api_keys (tenant_id);
"""

AGENTS: LiteralString = """
    CREATE TABLE agents (
        tenant_id  {text} NOT NULL REFERENCES tenants (id),
        name       {text} NOT NULL,
        agent      {text} NOT NULL,     -- the Agent, as JSON
        created_at {time} NOT NULL,
        PRIMARY KEY (tenant_id, name)
    );
"""

INGEST_JOBS: LiteralString = """
    -- Background ingests (Library.submit), here so that any process on the store can finish
    -- one whose process died. The file's bytes wait in the blob folder meanwhile.
    CREATE TABLE ingest_jobs (
        id             {text} PRIMARY KEY,  -- the id the source gets: src_…
        tenant_id      {text} NOT NULL,
        bucket_id      {text} NOT NULL,
        filename       {text} NOT NULL,
        mime_type      {text} NOT NULL,
        content_hash   {text} NOT NULL,
        byte_size      {bigint} NOT NULL,
        acl            {labels} NOT NULL,
        metadata       {json} NOT NULL,
        effective_date {date},
        state          {text} NOT NULL,     -- queued, running, done, failed
        attempts       {int} NOT NULL,      -- runs started
        lease_owner    {text},              -- the process running it
        lease_expires  {time},              -- when another process may take it over
        pages_done     {int} NOT NULL,
        pages_total    {int} NOT NULL,
        result_id      {text},              -- once done: the source it ended with
        error          {text},              -- once failed: why
        unreadable     {flag} NOT NULL,     -- failed on the file itself
        created_at     {time} NOT NULL,
        updated_at     {time} NOT NULL
    );
    CREATE INDEX ingest_jobs_by_bucket ON ingest_jobs (bucket_id, content_hash);
    CREATE INDEX ingest_jobs_by_state ON ingest_jobs (state, lease_expires);
    CREATE INDEX ingest_jobs_by_content_hash ON ingest_jobs (content_hash);
"""
