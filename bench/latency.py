"""Search latency at 10k and 100k passages, against bm25s over the same passages.

The passages are synthetic but made of real sentences: each is 3-5 sentences drawn at random
(seeded) from a pool of 6,000 real sentences (SciFact abstracts in English, SQuAD-es contexts
in Spanish, CMRC contexts in Chinese: 70/15/15). The pool is embedded once by the real model
(cached in bench/.cache), and a passage's vector is the normalised mean of its sentences' vectors: a
stand-in for embedding each of 100k passages, which would take about nine hours with e5-small
here, that keeps the vectors where real ones lie (which matters to the HNSW graph used from 50k
vectors on). Passages go into the store in sources of 100, one chunk each. Timing starts once the
graph holds every vector. Queries are real (SciFact claims, XQuAD questions) and are embedded by
the real model inside each timed search.

Run through bench/retrieval.py:  .venv/bin/python bench/retrieval.py latency
"""

from __future__ import annotations

import hashlib
import json
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from citewell.config import RetrieveSettings, Settings
from citewell.ingest.segment import sentence_spans
from citewell.ingest.text import PARSER as TEXT
from citewell.language import detect_language
from citewell.library import Library
from citewell.model import ChunkDraft, RetrievalMode, SearchRequest
from citewell.store.base import SourceDraft
from common import (
    CACHE,
    evaldata_dir,
    model_tag,
    open_library,
    percentile,
    read_jsonl,
    table,
)

PASSAGES_PER_SOURCE = 100
QUERIES = 200


POOL = {"en": 4200, "es": 900, "zh": 900}
"""Sentences per language in the pool the passages are drawn from."""


def sentence_pools(evaldata: Path) -> dict[str, list[str]]:
    english = [s for d in read_jsonl(evaldata / "scifact" / "corpus.jsonl") for s in d["sentences"]]
    spanish = _squad_sentences(evaldata / "squad_es_v2" / "dev-v2.0-es_small.json")
    chinese = _squad_sentences(evaldata / "cmrc2018" / "cmrc2018_trial.json")
    rng = random.Random(3)
    found = {"en": english, "es": spanish, "zh": chinese}
    return {lang: rng.sample(sorted(set(found[lang])), size) for lang, size in POOL.items()}


def pool_vectors(
    library: Library, embedder: str, pools: dict[str, list[str]]
) -> dict[str, np.ndarray]:
    """The real embedding of every pool sentence, computed once per embedder and cached."""
    path = CACHE / f"latency-pool-{embedder}{model_tag(embedder)}.npz"
    if path.exists():
        cached = np.load(path)
        return {lang: cached[lang] for lang in pools}
    vectors = {lang: library.embedder.embed_passages(pool) for lang, pool in pools.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **vectors)
    return vectors


def _squad_sentences(path: Path) -> list[str]:
    from citewell.ingest.base import Block, BlockKind
    from citewell.model import Span

    data = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            text = paragraph["context"]
            block = Block(BlockKind.PARAGRAPH, Span(start=0, end=len(text)), ())
            out.extend(text[s.start : s.end] for s in sentence_spans(text, [block]))
    return out


Passage = tuple[str, list[int]]
"""A passage's language and the indices of its sentences in that language's pool."""


def synthetic_passages(n: int, seed: int = 7) -> list[Passage]:
    rng = random.Random(seed)
    languages = rng.choices(["en", "es", "zh"], weights=[70, 15, 15], k=n)
    return [(lang, rng.choices(range(POOL[lang]), k=rng.randint(3, 5))) for lang in languages]


def passage_texts(pools: dict[str, list[str]], passages: Sequence[Passage]) -> list[str]:
    joiner = {"en": " ", "es": " ", "zh": ""}
    return [joiner[lang].join(pools[lang][i] for i in picks) for lang, picks in passages]


def passage_vectors(vectors: dict[str, np.ndarray], passages: Sequence[Passage]) -> np.ndarray:
    out = np.stack([vectors[lang][picks].mean(axis=0) for lang, picks in passages])
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out.astype(np.float32)


def queries(evaldata: Path) -> list[str]:
    claims = [c["claim"] for c in read_jsonl(evaldata / "scifact" / "claims_train.jsonl")]
    rng = random.Random(11)
    picked = rng.sample(claims, QUERIES // 2)
    for language in ("en", "es", "zh"):
        data = json.loads((evaldata / "xquad" / f"xquad.{language}.json").read_text("utf-8"))
        questions = [q["question"] for a in data["data"] for p in a["paragraphs"] for q in p["qas"]]
        picked += rng.sample(questions, QUERIES // 6)
    return picked


def fill_store(library: Library, passages: Sequence[str], vectors: np.ndarray) -> float:
    """Store the passages, 100 to a source, one chunk each; returns passages per second."""
    bucket = library.create_bucket("scale").id
    started = time.perf_counter()
    for first in range(0, len(passages), PASSAGES_PER_SOURCE):
        group = passages[first : first + PASSAGES_PER_SOURCE]
        data = "\n\n".join(group).encode()
        document = TEXT.parse(data, filename=f"{first}.txt", limits=library.settings.ingest)
        sentences = sentence_spans(document.text, document.blocks)
        chunks = tuple(
            ChunkDraft(
                span=block.span,
                heading_path=(),
                page_numbers=(),
                sentences=tuple(s for s in sentences if block.span.contains(s)),
                language=detect_language(document.text[block.span.start : block.span.end]),
            )
            for block in document.blocks
        )
        library.store.add_source(
            SourceDraft(
                bucket_id=bucket,
                filename=f"{first}.txt",
                mime_type="text/plain",
                content=data,
                content_hash=hashlib.sha256(data).hexdigest(),
                text=document.text,
                chunks=chunks,
                vectors=vectors[first : first + len(chunks)],
                vector_keys=tuple(f"{first}-{i}" for i in range(len(chunks))),
                embedder=library.embedder.name,
            )
        )
    return len(passages) / (time.perf_counter() - started)


def timed(function, items) -> list[float]:
    times = []
    for item in items:
        started = time.perf_counter()
        function(item)
        times.append((time.perf_counter() - started) * 1000)
    return times


def bm25s_baseline(passages: Sequence[str], query_texts: Sequence[str]) -> list[float]:
    import bm25s

    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(list(passages), stopwords="en", show_progress=False), show_progress=False
    )

    def search(query: str) -> None:
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        retriever.retrieve(tokens, k=10, show_progress=False)

    return timed(search, query_texts)


def _limit_blas(threads: int) -> None:
    """numpy's BLAS (the exact dense search) gets the same thread budget as the embedder."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(threads)


def searches(library: Library, query_texts: Sequence[str]) -> dict[str, list[float]]:
    """Milliseconds per search in each retrieval mode, and of the query embedding alone."""
    library.embedder.embed_query("warm up")
    times = {}
    for mode in RetrievalMode:
        requests = [SearchRequest(query=q, bucket_ids=("scale",), mode=mode) for q in query_texts]
        library.search(requests[0])
        times[f"citewell {mode.value}"] = timed(library.search, requests)
    times["query embedding alone"] = timed(library.embedder.embed_query, query_texts)
    return times


def latency(embedders: Sequence[str], sizes: Sequence[int], threads: int) -> None:
    evaldata = evaldata_dir()
    pools = sentence_pools(evaldata)
    query_texts = queries(evaldata)
    rows = []
    for size in sizes:
        passages = synthetic_passages(size)
        texts = passage_texts(pools, passages)
        baseline = bm25s_baseline(texts, query_texts)
        base = percentile(baseline, 50)
        rows.append([size, "bm25s (baseline)", "-", base, percentile(baseline, 95), 1.0])
        for embedder in embedders:
            with tempfile.TemporaryDirectory() as tmp:
                settings = Settings(data_dir=Path(tmp), retrieve=RetrieveSettings(threads=threads))
                with open_library(settings, embedder) as library:
                    vectors = passage_vectors(pool_vectors(library, embedder, pools), passages)
                    rate = fill_store(library, texts, vectors)
                    started = time.perf_counter()
                    # The first search loads the vectors; the graph is then built in the background.
                    library.search(SearchRequest(query="warm up", bucket_ids=("scale",)))
                    ready = library.store.vectors.wait_until_ready(timeout=1800)
                    waited = time.perf_counter() - started
                    print(
                        f"  {size} passages stored at {rate:.0f}/s ({embedder}); vector graph"
                        f" ready: {ready}, {waited:.0f} s after the first search"
                    )
                    _limit_blas(threads)
                    for name, times in searches(library, query_texts).items():
                        p50, p95 = percentile(times, 50), percentile(times, 95)
                        rows.append([size, name, embedder, p50, p95, p50 / base])
    print(table(rows, ["passages", "search", "embedder", "p50 ms", "p95 ms", "p50 / bm25s p50"]))
