"""How the PostgreSQL store searches: each search one SQL statement, built here.

- **Lexical**: BM25. Each chunk keeps its terms exactly as the embedded store's analyzers make
  them (``analysis.terms``: per-language stemming, Chinese segmented by jieba) in a ``tsvector``,
  each lexeme prefixed with its analyzer's name so that statistics stay per language, as in the
  embedded store. The counts BM25 needs (chunks per term; chunks and terms per analyzer) are kept
  in ``lexical_terms`` and ``lexical_fields`` by every write, so a score is the embedded store's
  (tantivy's) score. BM25 is a sum over the query's terms of idf(term) × impact(term, chunk), so
  each chunk's terms are also kept as postings ordered by impact (``lexical_postings``): a search
  reads a bounded number of each query term's best postings that the scope allows, ranks their
  chunks by the sum they reach, and scores a pool of the best of them exactly. Its cost is
  bounded by the query's length, not by how many chunks hold a common word (``Search.lexical``).
- **Dense**: pgvector's cosine distance, written as the embedder's HNSW index has it.
- **Hybrid**: both lists fused inside the same statement, with the semantics of fusion.py.
- **Permissions**: ``allowed``, the sources the scope may see, is the first CTE of every statement,
  and every ranking joins it before it ranks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, LiteralString

import numpy as np
import psycopg
from psycopg import sql
from psycopg.rows import DictRow

from citewell import analysis
from citewell.store.base import Fusion, Scope, Vectors
from citewell.store.filters import POSTGRES, SqlParam, compile_filter
from citewell.store.fusion import best_part

__all__ = [
    "ChunkTerms",
    "Search",
    "add_postings",
    "chunk_terms",
    "count_terms",
    "forget_postings",
    "refresh_impacts",
]

_HNSW_MIN_SHARE = 0.02
"""Smallest share of all chunks a scope must allow for dense search to walk the HNSW graph: the
graph walk visits at most 20,000 entries (pgvector's default), which at 2% still yields about
400 allowed hits, four times the candidates a hybrid search takes."""
POOL_PER_RESULT = 10
"""Chunks scored exactly per result asked for, at least (the pool setting holds for short
lists): the order of what the postings read add up to is rough, and a long list needs a wider
pool (at 1M passages a hybrid search's 100 lexical results: 0.948 of exact BM25's scoring 500,
0.968 scoring 1,000; docs/benchmarks.md)."""
_DRIFT = 0.1
"""How far (a share) a field's average chunk length may move from the one its stored impacts
were computed with before a write of that field computes them again."""
_MAX_POSITIONS = 256
"""Occurrences of one term a tsvector can record; a term counts at most this often in a chunk."""
_POSITIONS = ["", *(",".join(map(str, range(1, n + 1))) for n in range(1, _MAX_POSITIONS + 1))]
"""The positions of a lexeme that occurs n times, as tsvector input writes them."""

# The part one list contributes to a fused score, per ``Fusion.method`` (as in fusion.py), over a
# list ``l`` of (score, rank).
_FUSION_PARTS: dict[str, LiteralString] = {
    "rrf": "1.0::float8 / (%(rrf_k)s + l.rank)",
    "convex": (
        "coalesce((l.score - min(l.score) OVER ())"
        " / nullif(max(l.score) OVER () - min(l.score) OVER (), 0), 1.0::float8)"
    ),
}


_NO_LEXICAL: LiteralString = "lexical AS (SELECT NULL::text AS id, NULL::float8 AS score LIMIT 0)"


class Search:
    """The parts (CTEs) of one search statement, and their parameters (by name).

    ``allowed`` is the permission check: the sources the scope may see, which every ranking
    joins before it ranks; each statement starts with it.
    """

    def __init__(
        self,
        scope: Scope,
        *,
        query: str,
        vector: Vectors | None,
        embedder: str,
        dim: int,
    ) -> None:
        principal = scope.principal
        bucket_ids = [
            b for b in scope.bucket_ids if principal.bucket_ids is None or b in principal.bucket_ids
        ]
        self.nothing_allowed = not bucket_ids
        lexemes = [
            _lexeme(field, term)
            for field, terms in analysis.query_terms(query).items()
            for term in terms
        ]
        self.lexemes = lexemes
        self._embedder = embedder
        self._dim = dim
        self.params: dict[str, Any] = {
            "tenant_id": principal.tenant_id,
            "bucket_ids": bucket_ids,
            "lexemes": lexemes,
            "tsquery": " | ".join(_quote(lexeme) for lexeme in lexemes),
            "vector": None if vector is None else np.asarray(vector, dtype=np.float32),
        }
        conditions: list[str] = ["b.tenant_id = %(tenant_id)s", "b.id = ANY(%(bucket_ids)s)"]
        if not scope.include_superseded:
            conditions.append("s.superseded_by IS NULL")
        if not principal.sees_all_labels:
            conditions.append("(cardinality(s.acl) = 0 OR s.acl && %(acl_labels)s::text[])")
            self.params["acl_labels"] = sorted(principal.acl_labels)
        if scope.filters is not None:
            condition, filter_params = compile_filter(scope.filters, POSTGRES)
            conditions.append(f"({self._named(condition, filter_params)})")
        self.allowed = sql.SQL(
            "allowed AS (SELECT s.key, s.chunk_count FROM sources s"
            " JOIN buckets b ON b.key = s.bucket_key"
            f" WHERE {' AND '.join(conditions)})"
        )

    def _named(self, condition: str, params: list[SqlParam]) -> str:
        """The condition with its positional placeholders named (``filter_0``, ...)."""
        parts = condition.split("%s")
        named = parts[0]
        for index, (part, param) in enumerate(zip(parts[1:], params, strict=True)):
            self.params[f"filter_{index}"] = param
            named += f"%(filter_{index})s{part}"
        return named

    def lexical(self, limit: int, depth: int | None, pool: int, share: float = 0.0) -> sql.Composed:
        """CTEs ending in ``lexical (id, score)``: BM25, best first, at most ``limit``.

        With a ``depth``, the query's terms share a budget of ``depth`` postings each, or of
        ``share`` of the library's chunks when that is more (a common term holds more chunks as
        the library grows, and the same depth reads a smaller part of them: at 1M passages 2,000
        postings found 0.87 of exact BM25's top 100, 5,000 found 0.95): a term
        held by fewer chunks reads them all and leaves the rest of its share to the terms held by
        more, evenly. Each term reads its postings best first from an index, skipping chunks the
        scope does not allow; the chunks reached are ranked by the sum of what their read
        postings add, and the best ``pool`` (or ``POOL_PER_RESULT`` × ``limit``, if more) are
        scored exactly.
        That sum misses what common terms add beyond their share, so it is a rough order:
        recall comes from the width of the pool (at 100k passages and a depth of 200, where
        common terms get the share a depth of 2,000 gives them at 1M, recall@10 is 0.94 scoring
        200 and 0.97 scoring 500; ranking the pool by what a chunk could still gain was worse:
        docs/benchmarks.md). A query whose terms are all held by fewer chunks than ``depth`` is
        answered exactly; a chunk that reaches the list only through postings beyond the share
        of common terms is missed (bench/scale.py measures how often, against ``depth`` None:
        every chunk holding a query term scored exactly, at a cost that grows with how many
        chunks hold it).
        """
        if depth is None:
            scored = sql.SQL(
                "scored AS (SELECT c.key FROM chunks c WHERE c.lexemes @@ %(tsquery)s::tsquery"
                # An array, not a subquery: the planner then searches the GIN index once,
                # instead of once per allowed source (minutes at 1M chunks).
                " AND c.source_key = ANY(ARRAY(SELECT key FROM allowed)))"
            )
        else:
            self.params["lexical_depth"] = depth
            self.params["lexical_share"] = share
            self.params["rescored"] = max(pool, POOL_PER_RESULT * limit)
            scored = sql.SQL(
                "budget AS (SELECT greatest(%(lexical_depth)s,"
                " ceil(%(lexical_share)s * chunks))::int8 AS depth FROM totals),"
                " shares AS (SELECT q.term, q.idf, CASE WHEN q.chunks < b.depth"
                " THEN q.chunks ELSE b.depth + s.spare / s.common END AS depth"
                " FROM query_terms q CROSS JOIN budget b CROSS JOIN"
                " (SELECT sum(greatest(0, b.depth - t.chunks)) AS spare,"
                " count(*) FILTER (WHERE t.chunks >= b.depth) AS common"
                " FROM query_terms t CROSS JOIN budget b) s),"
                " scored AS (SELECT p.chunk_key AS key FROM shares q CROSS JOIN LATERAL"
                " (SELECT chunk_key, impact FROM lexical_postings"
                " WHERE term = q.term"
                # "OR false" keeps the planner from turning the test into a join, which loses
                # the index's order: it stays a hashed lookup made once per statement.
                " AND (source_key IN (SELECT key FROM allowed) OR false)"
                " ORDER BY impact DESC LIMIT q.depth) p"
                " GROUP BY p.chunk_key ORDER BY sum(q.idf * p.impact) DESC, p.chunk_key"
                " LIMIT %(rescored)s)"
            )
        return self.scored_exactly(limit, scored)

    def scored_exactly(self, limit: int, candidates: sql.Composable) -> sql.Composed:
        """CTEs ending in ``lexical (id, score)``: BM25 of the chunks ``candidates`` names (CTEs
        ending in ``scored (key)``, which may read ``query_terms (lexeme, term, idf, chunks)``:
        a query term, its hash, its idf and how many chunks hold it), best first, at most
        ``limit``."""
        self.params["lexical_limit"] = limit
        return sql.SQL(
            "totals AS (SELECT sum(chunks)::float8 AS chunks FROM lexical_fields),"
            " query_terms AS (SELECT t.lexeme, hashtextextended(t.lexeme, 0) AS term, t.chunks,"
            " ln(1 + (n.chunks - t.chunks + 0.5) / (t.chunks + 0.5)) AS idf"
            " FROM lexical_terms t CROSS JOIN totals n WHERE t.lexeme = ANY(%(lexemes)s)),"
            " {candidates},"
            " lexical AS (SELECT c.id, sum(q.idf * bm25_impact(cardinality(u.positions),"
            " c.lexical_length, f.terms / n.chunks)) AS score"
            " FROM scored s JOIN chunks c ON c.key = s.key"
            " JOIN lexical_fields f ON f.field = c.lexical_field CROSS JOIN totals n"
            " CROSS JOIN LATERAL unnest(c.lexemes) AS u JOIN query_terms q ON q.lexeme = u.lexeme"
            ' GROUP BY c.id ORDER BY score DESC, c.id COLLATE "C" LIMIT %(lexical_limit)s)'
        ).format(candidates=candidates)

    def steer(self, exact_below: int, ef_search: int) -> sql.Composed:
        """A statement that, for the rest of the transaction, makes dense search walk the HNSW
        graph when the scope allows at least ``exact_below`` chunks and at least
        ``_HNSW_MIN_SHARE`` of all chunks, and otherwise scan exactly (sorting every allowed
        chunk's distance). A graph walk keeps ``ef_search`` candidates and, when filtered, keeps
        walking until its limit is filled, in exact distance order. Every setting is local to
        the transaction: the connection keeps none of them.

        The planner cannot tell on its own: it cannot estimate how many chunks a scope (ACL
        labels, filters) allows. An exact scan is exact, and fast for small scopes; a filtered
        graph walk (iterative, in strict order) stays fast for large ones but slows down as the
        scope narrows (bench/postgres.py), and past pgvector's ``hnsw.max_scan_tuples`` (20,000
        index entries) it stops with fewer hits than asked for.
        """
        self.params["exact_below"] = exact_below
        self.params["ef_search"] = str(ef_search)
        return sql.SQL(
            "WITH {}, size AS (SELECT coalesce(sum(chunk_count), 0) AS allowed,"
            " (SELECT coalesce(sum(chunks), 0) FROM lexical_fields) AS total FROM allowed)"
            " SELECT set_config('enable_sort', CASE WHEN allowed >= %(exact_below)s"
            " AND allowed >= total * {share} THEN 'off' ELSE 'on' END, true),"
            " set_config('hnsw.iterative_scan', 'strict_order', true),"
            " set_config('hnsw.ef_search', %(ef_search)s, true) FROM size"
        ).format(self.allowed, share=sql.Literal(_HNSW_MIN_SHARE))

    def dense(self, limit: int) -> sql.Composed:
        """CTEs ending in ``dense (id, distance, score)``: the nearest, at most ``limit``, in no
        order (ties at the limit fall either way)."""
        self.params["dense_limit"] = limit
        # The expression and the embedder as the HNSW index has them, so the planner can use it;
        # ordered by distance alone, which the index scan gives.
        return sql.SQL(
            "dense AS (SELECT id, distance, 1 - distance AS score FROM"
            " (SELECT c.id, v.vector::vector({dim}) <=> %(vector)s::vector({dim}) AS distance"
            " FROM vectors v JOIN chunks c ON c.vector_key = v.vector_key"
            " WHERE v.embedder = {embedder} AND c.source_key IN (SELECT key FROM allowed)"
            " ORDER BY distance LIMIT %(dense_limit)s) nearest)"
        ).format(dim=sql.Literal(self._dim), embedder=sql.Literal(self._embedder))

    def hybrid(
        self, fusion: Fusion, limit: int, depth: int | None, pool: int, share: float = 0.0
    ) -> sql.Composed:
        """The whole statement of a hybrid search: both rankings, fused as fusion.py fuses them.

        Rows: id, fused, lexical, lexical_rank, dense, dense_rank; best first.
        """
        self.params.update(
            rrf_k=fusion.rrf_k,
            lexical_weight=fusion.lexical_weight,
            best=best_part(fusion),
            limit=limit,
        )
        ranked = sql.SQL(", ").join(
            [
                self.allowed,
                self.lexical(fusion.candidates, depth, pool, share)
                if self.lexemes
                else sql.SQL(_NO_LEXICAL),
                self.dense(fusion.candidates),
            ]
        )
        # As fusion.py: a list that found nothing gives the other the whole weight.
        return sql.SQL(
            "WITH {ranked},"
            " lex AS (SELECT id, score, row_number() OVER"
            ' (ORDER BY score DESC, id COLLATE "C") AS rank FROM lexical),'
            " den AS (SELECT id, score, row_number() OVER"
            ' (ORDER BY distance, id COLLATE "C") AS rank FROM dense),'
            " lex_part AS (SELECT l.*, {part} AS part FROM lex l),"
            " den_part AS (SELECT l.*, {part} AS part FROM den l),"
            " weight AS (SELECT CASE WHEN NOT EXISTS (SELECT FROM lex) THEN 0.0::float8"
            " WHEN NOT EXISTS (SELECT FROM den) THEN 1.0::float8"
            " ELSE %(lexical_weight)s::float8 END AS w),"
            " fused AS (SELECT coalesce(l.id, d.id) AS id, l.score AS lexical,"
            " l.rank AS lexical_rank, d.score AS dense, d.rank AS dense_rank,"
            " w.w * coalesce(l.part, 0.0::float8) + (1 - w.w) * coalesce(d.part, 0.0::float8)"
            " AS raw, w.w * %(best)s::float8 + (1 - w.w) * %(best)s::float8 AS best"
            " FROM lex_part l FULL JOIN den_part d ON d.id = l.id CROSS JOIN weight w)"
            " SELECT id, least(1.0::float8, raw / best) AS fused, lexical, lexical_rank, dense,"
            ' dense_rank FROM fused ORDER BY raw DESC, id COLLATE "C" LIMIT %(limit)s'
        ).format(ranked=ranked, part=sql.SQL(_FUSION_PARTS[fusion.method]))


# lexical terms -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ChunkTerms:
    """A chunk's terms as its lexical index entry holds them."""

    field: str
    counts: dict[str, int]
    """Occurrences per lexeme."""
    length: int
    """Terms in all (BM25's document length)."""

    @classmethod
    def stored(cls, field: str, lexemes: list[str], length: int) -> ChunkTerms:
        """A stored chunk's terms, as far as BM25's statistics count them."""
        return cls(field, dict.fromkeys(lexemes, 1), length)

    def tsvector(self) -> str:
        """The text form of the tsvector: each lexeme with as many positions as it occurs."""
        return " ".join(
            f"{_quote(lexeme)}:{_POSITIONS[min(n, _MAX_POSITIONS)]}"
            for lexeme, n in self.counts.items()
        )


def _lexeme(field: str, term: str) -> str:
    """A term as a lexeme: prefixed by its analyzer, so languages keep their own statistics."""
    return f"{field.removeprefix('text_')}/{term}"


def chunk_terms(text: str, language: str | None) -> ChunkTerms:
    field = analysis.field_name(language)
    terms = analysis.terms(text, language)
    return ChunkTerms(field, dict(Counter(_lexeme(field, term) for term in terms)), len(terms))


def _quote(lexeme: str) -> str:
    """A lexeme quoted for tsvector and tsquery input."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def count_terms(
    conn: psycopg.Connection[DictRow], chunks: Sequence[ChunkTerms], *, sign: int
) -> list[str]:
    """Add (``sign`` 1) or remove (-1) chunks from BM25's statistics; their fields.

    Rows are updated in lexeme order, the same in every transaction, so concurrent writers wait
    for each other instead of deadlocking. The fields' rows stay locked until the transaction
    ends: whatever a write then does to the fields' postings, no other write does meanwhile.
    """
    holding = Counter(lexeme for chunk in chunks for lexeme in chunk.counts)
    fields: dict[str, list[int]] = {}
    for chunk in chunks:
        counted = fields.setdefault(chunk.field, [0, 0])
        counted[0] += 1
        counted[1] += chunk.length
    lexemes = sorted(holding)
    conn.execute(
        "INSERT INTO lexical_terms (lexeme, chunks)"
        " SELECT * FROM unnest(%s::text[], %s::bigint[]) ORDER BY 1"
        " ON CONFLICT (lexeme) DO UPDATE SET chunks = lexical_terms.chunks + excluded.chunks",
        (lexemes, [sign * holding[lexeme] for lexeme in lexemes]),
    )
    names = sorted(fields)
    conn.execute(
        "INSERT INTO lexical_fields (field, chunks, terms)"
        " SELECT * FROM unnest(%s::text[], %s::bigint[], %s::bigint[]) ORDER BY 1"
        " ON CONFLICT (field) DO UPDATE SET chunks = lexical_fields.chunks + excluded.chunks,"
        " terms = lexical_fields.terms + excluded.terms",
        (names, [sign * fields[n][0] for n in names], [sign * fields[n][1] for n in names]),
    )
    if sign < 0:
        conn.execute("DELETE FROM lexical_terms WHERE lexeme = ANY(%s) AND chunks <= 0", (lexemes,))
    return names


def refresh_impacts(conn: psycopg.Connection[DictRow], fields: Sequence[str]) -> None:
    """Compute the postings' impacts of those ``fields`` again whose average chunk length (BM25's,
    tantivy's: the field's terms over all chunks) has moved more than ``_DRIFT`` from the one
    they were computed with, or was never recorded.

    Only the fields a write touches, whose rows it already holds (``count_terms``): no lock is
    taken in another order, and no other write adds or removes the fields' postings meanwhile.
    The impacts only order the postings (a search scores its candidates afresh), so a field left
    drifting until its next write costs recall, never a wrong score; one refresh costs an update
    of every posting of the field, after the library has grown or shrunk by about ``_DRIFT`` of
    itself.
    """
    rows = conn.execute(
        "UPDATE lexical_fields f SET impact_length = f.terms / n.chunks"
        " FROM (SELECT sum(chunks)::float8 AS chunks FROM lexical_fields) n"
        " WHERE f.field = ANY(%s) AND f.chunks > 0 AND (f.impact_length IS NULL"
        " OR abs(f.terms / n.chunks / f.impact_length - 1) > %s)"
        " RETURNING f.field, f.impact_length",
        (list(fields), _DRIFT),
    ).fetchall()
    for row in rows:
        conn.execute(
            "UPDATE lexical_postings p"
            " SET impact = bm25_impact(p.occurrences, c.lexical_length, %s)"
            " FROM chunks c WHERE c.key = p.chunk_key AND c.lexical_field = %s",
            (row["impact_length"], row["field"]),
        )


def add_postings(conn: psycopg.Connection[DictRow], source_key: int | None) -> None:
    """The postings of a source's chunks (None: of every chunk), written before; after
    ``count_terms`` and ``refresh_impacts``, with the average they recorded."""
    conn.execute(
        "INSERT INTO lexical_postings (term, impact, chunk_key, source_key, occurrences)"
        " SELECT hashtextextended(u.lexeme, 0),"
        " bm25_impact(cardinality(u.positions), c.lexical_length, f.impact_length),"
        " c.key, c.source_key, cardinality(u.positions)"
        " FROM chunks c JOIN lexical_fields f ON f.field = c.lexical_field,"
        " unnest(c.lexemes) u WHERE %(source)s::bigint IS NULL OR c.source_key = %(source)s",
        {"source": source_key},
    )


def forget_postings(conn: psycopg.Connection[DictRow], source_keys: Sequence[int]) -> None:
    """Remove the postings of the sources' chunks; after ``count_terms``, as ``add_postings``."""
    conn.execute("DELETE FROM lexical_postings WHERE source_key = ANY(%s)", (list(source_keys),))
