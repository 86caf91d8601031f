"""Retrieval quality, ingest throughput and search latency of citewell's hybrid search.

Quality: nDCG@10 and Recall@10 on SciFact (claims_train against the 5,183-abstract corpus,
document level, BEIR-style) and XQuAD-R en/es/zh (each sentence a document), for BM25 only,
dense only and hybrid, per embedder, plus a grid of fusion settings computed from the same
candidate lists. Everything goes through the real ingest pipeline and store; the ingested stores
are kept in bench/.cache so later runs skip the (slow) embedding.

Throughput: the real pipeline on SciFact abstracts (passages/s) and on the text PDFs (pages/s).

Latency: p50/p95 of a search at 10k and 100k passages, against bm25s over the same passages in
the same process (the ratio is the figure to compare across machines).

    .venv/bin/python bench/retrieval.py quality --embedder e5-small --embedder use
    .venv/bin/python bench/retrieval.py throughput
    .venv/bin/python bench/retrieval.py latency --sizes 10000 100000
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from citewell.config import RetrieveSettings, Settings
from citewell.library import Library
from citewell.model import Principal
from citewell.retrieve.search import fusion_for
from citewell.store.base import ChunkHit, Fusion, Scope
from citewell.store.fusion import fuse
from common import (
    CACHE,
    EMBEDDERS,
    evaldata_dir,
    machine,
    mean,
    model_tag,
    ndcg_at,
    open_library,
    read_jsonl,
    recall_at,
    reproduce_line,
    table,
)

LOCAL = Principal.local()


@dataclass(frozen=True)
class Corpus:
    """Documents to ingest (name → text) and queries with the names of their relevant documents."""

    name: str
    language: str
    documents: dict[str, str]
    queries: list[tuple[str, set[str]]]


def scifact(evaldata: Path) -> Corpus:
    folder = evaldata / "scifact"
    documents = {
        str(d["doc_id"]): f"{d['title']}\n\n{' '.join(d['sentences'])}"
        for d in read_jsonl(folder / "corpus.jsonl")
    }
    queries = [
        (c["claim"], {str(i) for i in c["cited_doc_ids"]})
        for c in read_jsonl(folder / "claims_train.jsonl")
        if c["cited_doc_ids"]
    ]
    return Corpus("SciFact", "en", documents, queries)


def xquad_r(evaldata: Path, language: str) -> Corpus:
    import json

    data = json.loads((evaldata / "xquad_r" / f"{language}.json").read_text(encoding="utf-8"))
    documents: dict[str, str] = {}
    by_text: dict[str, str] = {}
    queries = []
    for a, article in enumerate(data["data"]):
        for p, paragraph in enumerate(article["paragraphs"]):
            names = []
            for s, (start, end) in enumerate(paragraph["sentence_breaks"]):
                text = paragraph["context"][start:end].strip()
                # Identical sentences are one document, as the store keeps them once.
                name = by_text.setdefault(text, f"{a}-{p}-{s}")
                documents[name] = text
                names.append((start, end, name))
            for qa in paragraph["qas"]:
                answer = qa["answers"][0]["answer_start"]
                relevant = {n for start, end, n in names if start <= answer < end}
                queries.append((qa["question"], relevant))
    return Corpus(f"XQuAD-R {language}", language, documents, queries)


# ingest ------------------------------------------------------------------------------------
def settings_for(embedder: str, corpus: str) -> Settings:
    slug = corpus.lower().replace(" ", "-")
    return Settings(
        data_dir=CACHE / f"retrieval-{embedder}{model_tag(embedder)}" / slug,
        retrieve=RetrieveSettings(threads=1),
    )


def _ingest_slice(settings: Settings, embedder: str, items: list[tuple[str, str]]) -> int:
    with open_library(settings, embedder) as library:
        library.create_bucket("corpus")
        for name, text in items:
            library.ingest(text.encode(), filename=f"{name}.txt", bucket="corpus")
    return len(items)


def ingest(settings: Settings, embedder: str, corpus: Corpus, workers: int) -> None:
    """Ingest every document (a no-op for those already there), in ``workers`` processes."""
    items = sorted(corpus.documents.items())
    slices = [items[i::workers] for i in range(workers)]
    started = time.perf_counter()
    if workers == 1:
        _ingest_slice(settings, embedder, items)
    else:
        with ProcessPoolExecutor(workers) as pool:
            list(pool.map(_ingest_slice, [settings] * workers, [embedder] * workers, slices))
    print(f"  {corpus.name}: {len(items)} documents ready in {time.perf_counter() - started:.0f} s")


# quality -----------------------------------------------------------------------------------
@dataclass
class Candidates:
    """Per query: the ranked chunk hits of each retriever, and the relevant documents."""

    lexical: list[list[ChunkHit]]
    dense: list[list[ChunkHit]]
    relevant: list[set[str]]


def candidates(library: Library, corpus: Corpus, depth: int) -> tuple[Candidates, Callable]:
    bucket = library.get_bucket("corpus").id
    scope = Scope(principal=LOCAL, bucket_ids=(bucket,))
    store = library.store
    lexical, dense = [], []
    for query, _ in corpus.queries:
        lexical.append(store.search_lexical(query, scope, limit=depth))
        vector = library.embedder.embed_query(query)
        dense.append(store.search_dense(vector, scope, limit=depth))
    names = {s.id: s.filename.removesuffix(".txt") for s in library.list_sources("corpus")}
    chunk_source: dict[str, str] = {}

    def documents(hits: Sequence[ChunkHit]) -> list[str]:
        """Document names in order of their best chunk."""
        missing = [h.chunk_id for h in hits if h.chunk_id not in chunk_source]
        for chunk in store.get_chunks(missing).values():
            chunk_source[chunk.id] = names[chunk.source_id]
        return list(dict.fromkeys(chunk_source[h.chunk_id] for h in hits))

    relevant = [rel for _, rel in corpus.queries]
    return Candidates(lexical, dense, relevant), documents


def scores(ranked_docs: Iterable[list[str]], relevant: list[set[str]]) -> tuple[float, float]:
    pairs = list(zip(ranked_docs, relevant, strict=True))
    return (
        mean(ndcg_at(r, rel) for r, rel in pairs),
        mean(recall_at(r, rel) for r, rel in pairs),
    )


def fused_scores(
    found: Candidates, documents: Callable, fusion: Fusion, depth: int
) -> tuple[float, float]:
    """nDCG@10 and Recall@10 of the two candidate lists fused with ``fusion``."""
    ranked = (
        documents([ChunkHit(f.chunk_id, 0.0) for f in fuse(lx, dn, fusion, limit=depth)])
        for lx, dn in zip(found.lexical, found.dense, strict=True)
    )
    return scores(ranked, found.relevant)


FUSION_GRID = [
    Fusion(method=method, lexical_weight=round(w / 10, 1), rrf_k=k)
    for method, ks in (("rrf", (10, 60)), ("convex", (60,)))
    for k in ks
    for w in range(0, 11)
]


def quality(embedders: Sequence[str], workers: int, depth: int) -> None:
    evaldata = evaldata_dir()
    corpora = [scifact(evaldata), *(xquad_r(evaldata, lang) for lang in ("en", "es", "zh"))]
    for embedder in embedders:
        print(f"\n## {embedder}")
        rows, grid_rows = [], {}
        for corpus in corpora:
            settings = settings_for(embedder, corpus.name)
            ingest(settings, embedder, corpus, workers)
            with open_library(settings, embedder) as library:
                found, documents = candidates(library, corpus, depth)
                default_fusion = fusion_for(settings.retrieve, library.embedder)
            lexical = scores((documents(h) for h in found.lexical), found.relevant)
            dense = scores((documents(h) for h in found.dense), found.relevant)

            hybrid = fused_scores(found, documents, default_fusion, depth)
            grid = {fusion: fused_scores(found, documents, fusion, depth) for fusion in FUSION_GRID}
            grid_rows[corpus.name] = grid
            best = max(grid, key=lambda f: grid[f][0])
            rows.append(
                [
                    corpus.name,
                    len(corpus.queries),
                    *lexical,
                    *dense,
                    *hybrid,
                    f"{grid[best][0]:.3f} ({best.method}, w={best.lexical_weight}, k={best.rrf_k})",
                ]
            )
        print(
            table(
                rows,
                [
                    "set",
                    "queries",
                    "BM25 nDCG@10",
                    "BM25 R@10",
                    "dense nDCG@10",
                    "dense R@10",
                    "hybrid nDCG@10",
                    "hybrid R@10",
                    "best grid nDCG@10",
                ],
            )
        )
        print("\nfusion grid, nDCG@10 per set (mean over sets last):")
        names = list(grid_rows)
        grid_table = [
            [
                f"{f.method} w={f.lexical_weight} k={f.rrf_k}",
                *(grid_rows[n][f][0] for n in names),
                mean(grid_rows[n][f][0] for n in names),
            ]
            for f in FUSION_GRID
        ]
        print(table(grid_table, ["fusion", *names, "mean"]))


# throughput --------------------------------------------------------------------------------
def throughput(embedders: Sequence[str], passages: int, threads: int) -> None:
    import tempfile

    evaldata = evaldata_dir()
    corpus = scifact(evaldata)
    docs = sorted(corpus.documents.items())
    pdfs = sorted((evaldata / "documents" / "pdf_text").glob("*.pdf"))
    rows = []
    for embedder in embedders:
        with tempfile.TemporaryDirectory() as tmp:
            settings = Settings(data_dir=Path(tmp), retrieve=RetrieveSettings(threads=threads))
            with open_library(settings, embedder) as library:
                library.create_bucket("t")
                library.embedder.embed_query("warm up the model")
                started, chunks, n = time.perf_counter(), 0, 0
                for name, text in docs:
                    result = library.ingest(text.encode(), filename=f"{name}.txt", bucket="t")
                    chunks += result.source.chunk_count
                    n += 1
                    if chunks >= passages:
                        break
                text_seconds = time.perf_counter() - started
                started, pages = time.perf_counter(), 0
                for pdf in pdfs:
                    pages += library.ingest_path(pdf, bucket="t").source.page_count or 0
                pdf_seconds = time.perf_counter() - started
        rows.append([embedder, n, chunks, chunks / text_seconds, pages, pages / pdf_seconds])
    print(
        table(
            rows,
            ["embedder", "abstracts", "passages", "passages/s", "PDF pages", "pages/s"],
        )
    )
    print(f"\nwithout embedding (parse, segment, chunk): {_pages_per_second(pdfs):.1f} PDF pages/s")


def _pages_per_second(pdfs: Sequence[Path], rounds: int = 10) -> float:
    """The ingest pipeline up to the embedder, which is where the rest of the time goes."""
    from citewell.ingest import parse
    from citewell.ingest.chunk import chunk_document
    from citewell.ingest.segment import sentence_spans

    limits = Settings().ingest
    started, pages = time.perf_counter(), 0
    for _ in range(rounds):
        for pdf in pdfs:
            document = parse(pdf.read_bytes(), filename=pdf.name, limits=limits)
            sentences = sentence_spans(document.text, document.blocks)
            chunk_document(document, sentences, max_words=limits.chunk_max_words)
            pages += len(document.pages)
    return pages / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=["quality", "throughput", "latency"])
    parser.add_argument("--embedder", action="append", choices=EMBEDDERS)
    parser.add_argument("--workers", type=int, default=1, help="ingest processes (quality)")
    parser.add_argument("--depth", type=int, default=100, help="candidates per retriever")
    parser.add_argument("--passages", type=int, default=1000, help="passages (throughput)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--threads", type=int, default=1, help="threads of native engines")
    args = parser.parse_args()
    embedders = args.embedder or ["e5-small", "use"]
    print(f"# bench/retrieval.py {args.part} — {time.strftime('%Y-%m-%d')} — {machine()}")
    print(f"# native engines on {args.threads} thread(s)")
    if args.part == "quality":
        quality(embedders, args.workers, args.depth)
    elif args.part == "throughput":
        throughput(embedders, args.passages, args.threads)
    else:
        from latency import latency

        latency(embedders, args.sizes, args.threads)
    print("\n" + reproduce_line())


if __name__ == "__main__":
    main()
