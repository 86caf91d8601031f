"""Copying an embedded store into PostgreSQL (``citewell migrate``).

Everything is copied as it is, ids, versions and times included, so keys, links, stored answers
and conversations keep working: tenants, API keys (their secrets' hashes), agents, buckets, the
ready sources with their pages, chunks and vectors (of every embedder), stored answers and
traces; and the background ingests under way, queued, for the first server on PostgreSQL to
read again (``Library.submit``). Sources still being written are left out, and so are the
background ingests that ended. The originals they hold are first put in the PostgreSQL store's
blob store: nothing to do when that is the same ``<data_dir>/blobs``, a copy into the S3 bucket
when ``blobs.url`` names one; so are the uploads of the Files APIs (``<data_dir>/files``). The
rows are then copied in one transaction, into a database that
holds no library yet: it either completes or leaves the database as it was. It is a bulk load
(``PostgresStore.bulk_load``): the HNSW index is built once, after the copy.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from citewell.errors import Conflict, NotFound
from citewell.store.objects import FolderObjects, ObjectStore
from citewell.store.objects.blobs import BlobStore
from citewell.store.postgres.search import add_postings, chunk_terms, refresh_impacts
from citewell.store.postgres.store import Connection, PostgresStore
from citewell.store.sqlite import schema

__all__ = ["copy_embedded"]


def copy_embedded(folder: Path, target: PostgresStore, uploads: ObjectStore) -> dict[str, int]:
    """Copy the embedded store in ``folder`` into ``target``, and the Files APIs' uploads into
    ``uploads`` (where the servers on ``target`` keep them); how many of each were copied.

    Raises ``NotFound`` when the folder holds no store, ``Conflict`` when the database already
    holds a library.
    """
    path = folder / "citewell.db"
    if not path.is_file():
        raise NotFound(f"no embedded store in {folder}", param="data_dir")
    writer = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        schema.migrate(writer)  # an older store is first brought up to date, in place
    finally:
        writer.close()
    source = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    source.row_factory = sqlite3.Row
    try:
        # Checked before anything is put or rebuilt (the bulk load rebuilds the HNSW index),
        # and again in the copy's transaction.
        with target.transaction() as conn:
            _refuse_a_library(conn)
        _copy_originals(source, BlobStore(FolderObjects(folder / "blobs")), target.blobs)
        files = _copy_uploads(folder / "files", uploads)
        with target.bulk_load(), target.transaction() as conn:
            _refuse_a_library(conn)
            return {**_copy(source, conn), "files": files}
    finally:
        source.close()


def _copy_originals(source: sqlite3.Connection, embedded: BlobStore, target: BlobStore) -> None:
    """Before any row that refers to them: a committed source always has its original."""
    query = (
        "SELECT content_hash FROM sources WHERE status = 'ready' UNION"
        " SELECT content_hash FROM ingest_jobs WHERE state IN ('queued', 'running')"
    )
    for (digest,) in source.execute(query):
        if not target.exists(digest):  # as when both are the same folder
            target.put(embedded.get(digest), digest)


def _copy_uploads(root: Path, target: ObjectStore) -> int:
    """Every object of the Files APIs (uploads, their metadata, vector stores' metadata), as it
    is, unless the target holds it already (as when both are the same folder); how many."""
    if not root.is_dir():
        return 0
    embedded = FolderObjects(root)
    copied = 0
    for tenant in sorted(entry.name for entry in root.iterdir() if entry.is_dir()):
        for name in embedded.names(tenant):
            if not target.exists(name):
                target.put(name, embedded.get(name))
                copied += 1
    return copied


def _refuse_a_library(conn: Connection) -> None:
    taken = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM buckets) OR EXISTS (SELECT 1 FROM api_keys)"
        " OR EXISTS (SELECT 1 FROM tenants WHERE id != 'default') AS taken"
    ).fetchone()
    if taken is None or taken["taken"]:
        raise Conflict("the database already holds a library; migrate into an empty one")


def _copy(source: sqlite3.Connection, conn: Connection) -> dict[str, int]:
    def rows(query: str) -> Iterator[sqlite3.Row]:
        return iter(source.execute(query))

    counts: dict[str, int] = {}

    def copy(table: str, sql: str, values: Iterator[tuple[Any, ...]]) -> None:
        counts[table] = 0

        def counted() -> Iterator[tuple[Any, ...]]:
            for value in values:
                counts[table] += 1
                yield value

        with conn.cursor() as cursor:
            cursor.executemany(sql, counted())

    copy(
        "tenants",
        "INSERT INTO tenants (id, name, created_at) VALUES (%s, %s, %s)"
        " ON CONFLICT (id) DO UPDATE SET name = excluded.name, created_at = excluded.created_at",
        ((r["id"], r["name"], r["created_at"]) for r in rows("SELECT * FROM tenants")),
    )
    copy(
        "api_keys",
        "INSERT INTO api_keys (id, tenant_id, name, secret_hash, permissions, bucket_ids,"
        " acl_labels, created_at, revoked_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            (
                r["id"],
                r["tenant_id"],
                r["name"],
                r["secret_hash"],
                json.loads(r["permissions"]),
                _list_or_none(r["bucket_ids"]),
                _list_or_none(r["acl_labels"]),
                r["created_at"],
                r["revoked_at"],
            )
            for r in rows("SELECT * FROM api_keys")
        ),
    )
    copy(
        "agents",
        "INSERT INTO agents (tenant_id, name, agent, created_at) VALUES (%s, %s, %s, %s)",
        (
            (r["tenant_id"], r["name"], r["agent"], r["created_at"])
            for r in rows("SELECT * FROM agents")
        ),
    )
    copy(
        "buckets",
        "INSERT INTO buckets (id, tenant_id, slug, name, created_at) VALUES (%s, %s, %s, %s, %s)",
        (
            (r["id"], r["tenant_id"], r["slug"], r["name"], r["created_at"])
            for r in rows("SELECT * FROM buckets ORDER BY key")
        ),
    )
    copy(
        "sources",
        "INSERT INTO sources (id, bucket_key, filename, mime_type, content_hash, byte_size,"
        " version, supersedes, superseded_by, title, language, modality, page_count,"
        " char_count, chunk_count, effective_date, acl, metadata, created_at, text)"
        " VALUES (%s, (SELECT key FROM buckets WHERE id = %s), %s, %s, %s, %s, %s, %s, %s, %s,"
        " %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            (
                r["id"],
                r["bucket_id"],
                r["filename"],
                r["mime_type"],
                r["content_hash"],
                r["byte_size"],
                r["version"],
                r["supersedes"],
                r["superseded_by"],
                r["title"],
                r["language"],
                r["modality"],
                r["page_count"],
                r["char_count"],
                r["chunk_count"],
                r["effective_date"],
                json.loads(r["acl"]),
                r["metadata"],
                r["created_at"],
                r["text"],
            )
            for r in rows(
                "SELECT s.*, b.id AS bucket_id FROM sources s JOIN buckets b"
                " ON b.key = s.bucket_key WHERE s.status = 'ready' ORDER BY s.key"
            )
        ),
    )
    copy(
        "pages",
        "INSERT INTO pages (source_key, number, label, start_offset, end_offset, width, height,"
        " modality, boxes, ocr_confidence, confidences)"
        " VALUES ((SELECT key FROM sources WHERE id = %s), %s, %s, %s, %s, %s, %s, %s, %s, %s,"
        " %s)",
        (
            (
                r["source_id"],
                r["number"],
                r["label"],
                r["start_offset"],
                r["end_offset"],
                r["width"],
                r["height"],
                r["modality"],
                r["boxes"],
                r["ocr_confidence"],
                r["confidences"],
            )
            for r in rows(
                "SELECT p.*, s.id AS source_id FROM pages p JOIN sources s"
                " ON s.key = p.source_key WHERE s.status = 'ready'"
            )
        ),
    )
    copy("chunks", _CHUNK_INSERT, _chunks(source))
    counts["vectors"] = 0
    with (
        conn.cursor() as cursor,
        cursor.copy(
            "COPY vectors (embedder, vector_key, vector) FROM STDIN (FORMAT BINARY)"
        ) as out,
    ):
        out.set_types(["text", "text", "vector"])
        for r in rows("SELECT * FROM vectors ORDER BY embedder, vector_key"):
            out.write_row(
                (r["embedder"], r["vector_key"], np.frombuffer(r["vector"], dtype=np.float32))
            )
            counts["vectors"] += 1
    copy(
        "answers",
        "INSERT INTO answers (id, tenant_id, answer_id, created_at, answer, conversation,"
        " rendered, previous_id, key_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            (
                r["id"],
                r["tenant_id"],
                r["answer_id"],
                r["created_at"],
                r["answer"],
                r["conversation"],
                r["rendered"],
                r["previous_id"],
                r["key_id"],
            )
            for r in rows("SELECT * FROM answers")
        ),
    )
    copy(
        "answer_sources",
        "INSERT INTO answer_sources (source_id, response_id) VALUES (%s, %s)",
        ((r["source_id"], r["response_id"]) for r in rows("SELECT * FROM answer_sources")),
    )
    copy(
        "traces",
        "INSERT INTO traces (answer_id, agent, created_at, trace) VALUES (%s, %s, %s, %s)",
        (
            (r["answer_id"], r["agent"], r["created_at"], r["trace"])
            for r in rows("SELECT * FROM traces")
        ),
    )
    copy("ingest_jobs", _JOB_INSERT, _jobs_under_way(source))
    # BM25's statistics and postings, counted once from the copied chunks.
    conn.execute(
        "INSERT INTO lexical_terms (lexeme, chunks)"
        " SELECT u.lexeme, count(*) FROM chunks c, unnest(c.lexemes) u GROUP BY u.lexeme"
    )
    conn.execute(
        "INSERT INTO lexical_fields (field, chunks, terms)"
        " SELECT lexical_field, count(*), sum(lexical_length) FROM chunks GROUP BY lexical_field"
    )
    fields = [row["field"] for row in conn.execute("SELECT field FROM lexical_fields")]
    refresh_impacts(conn, fields)
    add_postings(conn, None)
    return counts


_CHUNK_INSERT = (
    "INSERT INTO chunks (id, source_key, idx, start_offset, end_offset, heading_path,"
    " page_numbers, sentences, language, vector_key, lexical_field, lexemes, lexical_length)"
    " VALUES (%s, (SELECT key FROM sources WHERE id = %s), %s, %s, %s, %s, %s, %s, %s, %s, %s,"
    " %s::tsvector, %s)"
)


def _chunks(source: sqlite3.Connection) -> Iterator[tuple[Any, ...]]:
    for r in source.execute(
        "SELECT c.*, s.id AS source_id,"
        " substr(s.text, c.start_offset + 1, c.end_offset - c.start_offset) AS body"
        " FROM chunks c JOIN sources s ON s.key = c.source_key WHERE s.status = 'ready'"
        " ORDER BY c.key"
    ):
        terms = chunk_terms(r["body"], r["language"])
        yield (
            r["id"],
            r["source_id"],
            r["idx"],
            r["start_offset"],
            r["end_offset"],
            r["heading_path"],
            r["page_numbers"],
            r["sentences"],
            r["language"],
            r["vector_key"],
            terms.field,
            terms.tsvector(),
            terms.length,
        )


_JOB_INSERT = (
    "INSERT INTO ingest_jobs (id, tenant_id, bucket_id, filename, mime_type, content_hash,"
    " byte_size, acl, metadata, effective_date, state, attempts, pages_done, pages_total,"
    " unreadable, created_at, updated_at, submitter_labels)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 'queued', %s, 0, %s, false, %s, %s, %s)"
)


def _jobs_under_way(source: sqlite3.Connection) -> Iterator[tuple[Any, ...]]:
    """Each job under way, to be queued: whichever process held its lease is not on the new
    store, and its run is not counted (as when a server stops)."""
    query = "SELECT * FROM ingest_jobs WHERE state IN ('queued', 'running') ORDER BY created_at"
    for r in source.execute(query):
        yield (
            r["id"],
            r["tenant_id"],
            r["bucket_id"],
            r["filename"],
            r["mime_type"],
            r["content_hash"],
            r["byte_size"],
            json.loads(r["acl"]),
            r["metadata"],
            r["effective_date"],
            r["attempts"] - (r["state"] == "running"),
            r["pages_total"],
            r["created_at"],
            r["updated_at"],
            _list_or_none(r["submitter_labels"]),
        )


def _list_or_none(value: str | None) -> list[str] | None:
    return None if value is None else list(json.loads(value))
