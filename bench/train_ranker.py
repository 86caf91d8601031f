"""Trains the extractive generator's sentence ranker (src/citewell/generate/ranker.json).

On the tuning articles only (``answers.held_out`` is False) of XQuAD en/es/zh and SQuAD 2.0,
with the evidence the engine builds over the corpus alone and over the corpus plus 10,000
distractor passages (both cached by bench/answers.py). A sentence is labelled right when its
range overlaps a gold answer's (unanswerable questions: none is right). Headings are left out:
the generator never picks them.

1. A conditional logit (softmax over a question's candidate sentences; L2, damped Newton,
   numpy) on the standardised ``ranker.SIGNALS``.
2. Out-of-fold probabilities, leaving one article out at a time (the same article in every
   language and in both stores is in one fold), to choose the decision thresholds honestly:
   the ``decline_below`` / ``decline_margin`` pair with the best mean citation precision over
   10k passages among those whose contains-gold is at least the hand-weighted generator's in
   every set (precision is not bought with answers).
3. The final fit on all tuning articles, written with the thresholds to ranker.json.

    .venv/bin/python bench/train_ranker.py            # prints the grid, writes ranker.json
    .venv/bin/python bench/train_ranker.py --dry-run  # prints only
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from answers import SETS, Labelled, agent_for, evidence_for, labelled, load, prepare_store
from citewell.generate.extractive import ExtractiveGenerator, Weights, _normalised
from citewell.generate.ranker import SIGNALS, WEIGHTS_FILE, Ranker, signals
from common import evaldata_dir, mean, reproduce_line, table

VIEWS = (0, 10000)
"""Distractor passages in the store the evidence comes from."""
L2 = 1.0
BELOW_GRID = tuple(round(x, 2) for x in np.arange(0.2, 0.91, 0.05))
MARGIN_GRID = (0.0, 0.05, 0.1, 0.2, 0.3)


@dataclass
class Question:
    set: str
    view: int
    article: str
    q: Labelled
    rows: np.ndarray
    """Signals of its candidate sentences (headings left out)."""
    candidates: list[int]
    """Evidence indices of those rows."""


def gather() -> list[Question]:
    weights = Weights()
    out = []
    for name in SETS:
        data = load(evaldata_dir(), name).split("tune")
        for view in VIEWS:
            settings = prepare_store(data, "e5-small", 1, view)
            for q in labelled(data, evidence_for(data, settings, agent_for(view))):
                candidates = [i for i, f in enumerate(q.features) if not f.heading]
                if not candidates:
                    rows = np.zeros((0, len(SIGNALS)))
                else:
                    scores = [weights.score(f) for f in q.features]
                    rows = signals(q.evidence, q.features, scores)[candidates]
                out.append(Question(name, view, q.item.article, q, rows, candidates))
    return out


def fit(questions: Sequence[Question], l2: float = L2) -> tuple[np.ndarray, ...]:
    """Standardisation (mean, scale) and coefficients of a conditional logit: per question, a
    softmax over its candidates whose target spreads evenly over the right ones (questions
    with none are left out). Damped Newton's method on the L2-penalised log-likelihood."""
    x = np.vstack([q.rows for q in questions if len(q.rows)])
    mu = x.mean(axis=0)
    sd = x.std(axis=0)
    sd[sd < 1e-9] = 1.0
    data = []
    for q in questions:
        y = np.asarray([q.q.right[i] for i in q.candidates], float)
        if y.sum():
            data.append(((q.rows - mu) / sd, y / y.sum()))

    def loss(w: np.ndarray) -> float:
        total = 0.5 * l2 * float(w @ w)
        for z, target in data:
            s = z @ w
            total += float(np.log(np.exp(s - s.max()).sum()) + s.max() - target @ s)
        return total

    w = np.zeros(x.shape[1])
    for _ in range(50):
        gradient = l2 * w
        hessian = l2 * np.eye(len(w))
        for z, target in data:
            s = z @ w
            p = np.exp(s - s.max())
            p /= p.sum()
            expected = p @ z
            gradient = gradient + expected - target @ z
            hessian = hessian + (z * p[:, None]).T @ z - np.outer(expected, expected)
        step = np.linalg.solve(hessian, gradient)
        before, size = loss(w), 1.0
        while loss(w - size * step) > before and size > 1e-4:
            size /= 2
        w = w - size * step
        if np.abs(size * step).max() < 1e-7:
            break
    return mu, sd, w


def ranker_of(mu: np.ndarray, sd: np.ndarray, w: np.ndarray, below: float, margin: float) -> Ranker:
    return Ranker(mu, sd, w, below, margin)


def choose(q: Question, p: np.ndarray, below: float, margin: float) -> int | None:
    """The evidence index answered with, or None to decline (as ExtractiveGenerator.choose)."""
    if not len(p):
        return None
    order = sorted(range(len(p)), key=lambda k: (-p[k], q.candidates[k]))
    best = order[0]
    if p[best] < below:
        return None
    text = _normalised(q.q.evidence.sentences[q.candidates[best]].text)
    runner = next(
        (k for k in order if _normalised(q.q.evidence.sentences[q.candidates[k]].text) != text),
        None,
    )
    if runner is not None and p[best] - p[runner] < margin:
        return None
    return q.candidates[best]


def figures(
    questions: Sequence[Question], probabilities: Sequence[np.ndarray], below: float, margin: float
) -> dict[str, float]:
    contains, precise, refused, false_refusals = [], [], [], []
    for q, p in zip(questions, probabilities, strict=True):
        chosen = choose(q, p, below, margin)
        if not q.q.item.golds:
            refused.append(float(chosen is None))
            continue
        false_refusals.append(float(chosen is None))
        if chosen is None:
            contains.append(0.0)
            continue
        text = q.q.evidence.sentences[chosen].text
        contains.append(float(any(g.text in text for g in q.q.item.golds)))
        precise.append(float(q.q.right[chosen]))
    return {
        "contains": mean(contains),
        "precision": mean(precise),
        "false refusal": mean(false_refusals),
        "refusal": mean(refused) if refused else float("nan"),
    }


def _cell(f: dict[str, float]) -> str:
    return "/".join(f"{f[k]:.3f}" for k in ("contains", "precision", "false refusal", "refusal"))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    print(f"# bench/train_ranker.py — {time.strftime('%Y-%m-%d')}")
    questions = gather()
    articles = sorted({q.article for q in questions})
    print(f"{len(questions)} questions (both views), {len(articles)} tuning articles")

    # Out-of-fold probabilities, one article left out at a time.
    oof: list[np.ndarray] = [np.zeros(0)] * len(questions)
    for article in articles:
        train = [q for q in questions if q.article != article]
        mu, sd, w = fit(train)
        held = ranker_of(mu, sd, w, 0, 0)
        for k, q in enumerate(questions):
            if q.article == article and len(q.rows):
                oof[k] = held.probabilities(q.rows)

    groups = {
        (s, v): [k for k, q in enumerate(questions) if (q.set, q.view) == (s, v)]
        for s in SETS
        for v in VIEWS
    }

    def at(below: float, margin: float, view: int) -> dict[str, dict[str, float]]:
        return {
            s: figures(
                [questions[k] for k in groups[s, view]],
                [oof[k] for k in groups[s, view]],
                below,
                margin,
            )
            for s in SETS
        }

    # The old hand-weighted generator on the same questions, for comparison.
    old = ExtractiveGenerator(ranker=None)
    print("\nhand weights (contains / precision / false refusal / refusal), per view:")
    floor: dict[str, float] = {}
    for view in VIEWS:
        cells = []
        for s in SETS:
            qs = [questions[k] for k in groups[s, view]]
            probs = []
            for q in qs:
                chosen = old.choose(q.q.evidence, q.q.features, max_sources=5)
                probs.append(
                    np.asarray([1.0 if chosen and c == chosen[0] else 0.0 for c in q.candidates])
                )
            hand = figures(qs, probs, 0.5, 0.0)
            cells.append(_cell(hand))
            if view == 10000:
                floor[s] = hand["contains"]
        print(f"  {view:>5} distractors:", cells)

    results = []
    for below, margin in itertools.product(BELOW_GRID, MARGIN_GRID):
        f = at(below, margin, 10000)
        results.append((below, margin, f))
    # Precision may not be bought with answers: every set keeps the hand weights' contains-gold.
    feasible = [r for r in results if all(r[2][s]["contains"] >= floor[s] for s in SETS)]
    feasible.sort(
        key=lambda r: (
            -round(mean(r[2][s]["precision"] for s in SETS), 4),
            -mean(r[2][s]["contains"] for s in SETS),
        )
    )
    print("\nout of fold, 10k distractors, contains gold >= hand weights' in every set:")
    rows = [
        [b, m, *(_cell(f[s]) for s in SETS), mean(f[s]["precision"] for s in SETS)]
        for b, m, f in feasible[:15]
    ]
    print(table(rows, ["below", "margin", *SETS, "mean precision"]))
    print("\nout of fold, never declining:")
    for view in VIEWS:
        print(f"  {view:>5} distractors:", [_cell(f) for f in at(0.0, 0.0, view).values()])
    below, margin, _ = feasible[0]
    print(f"\nchosen: decline_below={below} decline_margin={margin}")
    for view in VIEWS:
        print(f"  {view:>5} distractors:", [_cell(f) for f in at(below, margin, view).values()])

    mu, sd, w = fit(questions)
    print("\ncoefficients (standardised):")
    for name, c in sorted(zip(SIGNALS, w, strict=True), key=lambda p: -abs(p[1])):
        print(f"  {name:16} {c:+.3f}")
    payload = {
        "trained_by": "bench/train_ranker.py",
        "signals": list(SIGNALS),
        "mean": [round(float(v), 6) for v in mu],
        "scale": [round(float(v), 6) for v in sd],
        "coef": [round(float(v), 6) for v in w],
        "decline_below": below,
        "decline_margin": margin,
    }
    if not args.dry_run:
        Path(WEIGHTS_FILE).write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {WEIGHTS_FILE}")
    print("\n" + reproduce_line())


if __name__ == "__main__":
    main()
