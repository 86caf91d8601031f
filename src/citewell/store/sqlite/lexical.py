"""BM25 over tantivy, for English, Spanish, Chinese and text in any other language.

Each language has its own text field with its own analyzer, so BM25's statistics (document
frequencies, average length) are per language and a stemmer only ever sees its own language. The
query's language is not trusted: the query is analysed for every field and the terms of all fields
are OR-ed, so whatever language it is in finds documents in that language.

Chinese has no spaces: before tantivy sees any text (documents and queries alike), runs of Han
characters are segmented by jieba and the words joined with spaces for tantivy's tokenizer.

Queries are user text, never tantivy query syntax: they are analysed into terms and the query is
built from term queries, so quotes, colons, ``AND`` or brackets are only words (or nothing).
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import tantivy

from citewell import analysis
from citewell.errors import StoreError
from citewell.store.base import ChunkHit

__all__ = ["LexicalDoc", "LexicalIndex", "LexicalWriter"]

_WRITER_HEAP_PER_THREAD = 50_000_000


@dataclass(frozen=True, slots=True)
class LexicalDoc:
    """One chunk as the lexical index sees it."""

    chunk_id: str
    source_key: int
    """Non-negative integer naming the chunk's source; the unit of filtering and deletion."""
    text: str
    language: str | None
    """'en', 'es' or 'zh' pick that language's analyzer; anything else is indexed unstemmed."""


# --- analysis -------------------------------------------------------------------------------


# --- the index ------------------------------------------------------------------------------


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("chunk_id", stored=True, tokenizer_name="raw")
    builder.add_unsigned_field("source_key", indexed=True, fast=True)
    for name in analysis.analyzers():
        # Frequencies without positions: BM25 needs no more, as no phrase queries are built.
        builder.add_text_field(name, tokenizer_name=name, index_option="freq")
    return builder.build()


class LexicalWriter:
    """Adds and deletes documents; valid only inside ``LexicalIndex.writer()``."""

    def __init__(self, writer: tantivy.IndexWriter, schema: tantivy.Schema) -> None:
        self._writer: tantivy.IndexWriter | None = writer
        self._schema = schema

    def add(self, docs: Iterable[LexicalDoc]) -> None:
        writer = self._open()
        for doc in docs:
            if doc.source_key < 0:
                raise ValueError(f"source_key must be non-negative, not {doc.source_key}")
            entry = tantivy.Document()
            entry.add_text("chunk_id", doc.chunk_id)
            entry.add_unsigned("source_key", doc.source_key)
            entry.add_text(analysis.field_name(doc.language), analysis.prepare(doc.text))
            writer.add_document(entry)

    def delete_source(self, source_key: int) -> None:
        # By query: tantivy's delete-by-term takes a Python int as i64, which never matches a u64.
        only = tantivy.Query.term_set_query(self._schema, "source_key", [source_key])
        self._open().delete_documents_by_query(only)

    def _open(self) -> tantivy.IndexWriter:
        if self._writer is None:
            raise RuntimeError(
                "this LexicalWriter was used outside its `with index.writer()` block"
            )
        return self._writer

    def _close(self) -> None:
        self._writer = None


class LexicalIndex:
    """A tantivy index of chunks, in a folder (shared between processes) or in memory.

    Searches run concurrently from any thread. Writes take an exclusive lock, shared with other
    threads and with other processes using the same folder (a lock file beside it).
    """

    def __init__(self, path: Path | None, *, threads: int = 1) -> None:
        self._threads = threads
        self._schema = _schema()
        self._lock_path = path.with_name(path.name + ".lock") if path is not None else None
        self._write_lock = threading.Lock()
        try:
            if path is not None:
                path.mkdir(parents=True, exist_ok=True)
            index = tantivy.Index(self._schema, path=None if path is None else str(path))
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot open the lexical index at {path}: {exc}") from exc
        for name, analyzer in analysis.analyzers().items():
            index.register_tokenizer(name, analyzer)
        self._live: tantivy.Index | None = index

    @contextmanager
    def writer(self) -> Iterator[LexicalWriter]:
        """An exclusive writer: commits when the block ends normally, rolls back on an exception."""
        with self._write_lock, _file_lock(self._lock_path):
            raw = self._index.writer(
                heap_size=_WRITER_HEAP_PER_THREAD * self._threads, num_threads=self._threads
            )
            writer = LexicalWriter(raw, self._schema)
            try:
                yield writer
                _commit(raw)
            except BaseException:
                raw.rollback()
                raise
            finally:
                writer._close()
                # Ends tantivy's writer and frees its own lock before ours, so the next writer
                # (maybe in another process) can start.
                raw.wait_merging_threads()
            self._index.reload()

    def search(
        self, query: str, *, source_keys: Collection[int] | None, limit: int
    ) -> list[ChunkHit]:
        """Chunks matching any query term, by BM25 score, best first.

        Only chunks of ``source_keys`` (None: every source) are ranked: the restriction is part
        of the tantivy query and adds nothing to the scores.
        """
        terms = self._terms_query(query)
        if terms is None or limit <= 0 or (source_keys is not None and len(source_keys) == 0):
            return []
        if source_keys is not None:
            keys = sorted({int(key) for key in source_keys})
            allowed = tantivy.Query.term_set_query(self._schema, "source_key", keys)
            terms = tantivy.Query.boolean_query(
                [
                    (tantivy.Occur.Must, terms),
                    (tantivy.Occur.Must, tantivy.Query.const_score_query(allowed, 0.0)),
                ]
            )
        searcher = self._index.searcher()
        result = searcher.search(terms, limit, count=False)
        return [
            ChunkHit(str(searcher.doc(address).get_first("chunk_id")), float(score))
            for score, address in result.hits
        ]

    def refresh(self) -> None:
        """See what other processes have committed since this index last looked."""
        self._index.reload()

    def close(self) -> None:
        """Release the index (after any running write); using it afterwards is an error."""
        with self._write_lock:
            self._live = None

    @property
    def _index(self) -> tantivy.Index:
        if self._live is None:
            raise RuntimeError("the lexical index is closed")
        return self._live

    def _terms_query(self, query: str) -> tantivy.Query | None:
        clauses = [
            (tantivy.Occur.Should, tantivy.Query.term_query(self._schema, field, term, "freq"))
            for field, terms in analysis.query_terms(query).items()
            for term in terms
        ]
        return tantivy.Query.boolean_query(clauses) if clauses else None


def _commit(writer: tantivy.IndexWriter) -> None:
    try:
        writer.commit()
    except (OSError, ValueError) as exc:  # tantivy's I/O errors (a full disk, say)
        raise StoreError(f"the lexical index could not commit: {exc}") from exc


@contextmanager
def _file_lock(path: Path | None) -> Iterator[None]:
    """An exclusive flock on ``path`` (None: no lock, for an in-memory index), blocking."""
    if path is None:
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
