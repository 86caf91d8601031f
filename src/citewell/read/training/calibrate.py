"""Calibrating a trained reader: its blend per task, and per language its decline rule, its
sentence choice and its support threshold.

All are fit on the calibration part of the data (``data.article_part``,
``group.calibration_articles``): whole articles and records the network never trained on, so
the network's logit there is as trustworthy as it will be on a person's documents, not as it is
on what it memorised. They are fit on the built model's signals, the int8 network the server
runs, not torch's, so they calibrate what ships.

- The blends (``citewell.read.blend``): logistic regressions by Newton's method, with no
  negative weight, of each candidate's label on its three signals (``answers``, ``supports``),
  and of whether a question is answerable on the best of each signal over its candidates
  (``answerable``).
- The decline rule (``decline.fit_decline_rules``): per language, the answerability below which
  a part is declined, never higher where word overlap would answer it too; the rule that
  declines the most unanswerable questions while declining at most 8 % of the answerable ones.
  It is the card's, so every agent without a threshold of its own declines by it, and it is
  chosen again with every delta (``citewell reader calibrate`` chooses it again for the shipped
  one). It is fitted on the calibration articles' questions read as the engine serves them
  (``served``, ``citewell.served_reads``) in each language they hold both kinds of (Chinese's
  unanswerable ones made there), and on the groups for any other.
- The sentence choice (``choice.fit_choices``): per language, between word overlap's pick and
  the reader's likeliest, on the calibration articles' answerable questions read as the engine
  serves them that the reader's decline rule lets through.
- The support threshold (``support.fit_support_thresholds``): per language, the least support
  score at which a citation is kept, where supported and unsupported claims are best told
  apart — on the verifier's scores, a claim with a number its span lacks at 0
  (``verifier.states_another_number``). Every agent without a threshold of its own keeps
  citations by it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from citewell.model import DeclineRule
from citewell.read.base import Reader
from citewell.read.blend import SIGNALS, Blend, Judgement, Signals, best_signals
from citewell.read.cross_encoder import CrossEncoderReader, ReaderCard
from citewell.read.pairs import PairLimits
from citewell.read.training.choice import Pick, WordPick, fit_choices, word_picks
from citewell.read.training.config import TrainConfig
from citewell.read.training.data import Group, calibration_groups, per_set
from citewell.read.training.decline import Asked, fit_decline_rules
from citewell.read.training.metrics import roc_auc, top1
from citewell.read.training.support import fit_support_thresholds
from citewell.read.verifier import states_another_number

__all__ = ["Served", "calibrate", "calibrate_decline", "fit_blend"]

GROUPS_PER_SET = 200
"""Calibration groups read per (task, set): enough for four weights, in minutes."""


class Served(Protocol):
    """The calibration questions as the engine serves them with a reader
    (``citewell.served_reads.ServedStore``)."""

    def asked(self, reader: Reader) -> Sequence[Asked]:
        """Each question as the decline rule decides on it."""
        ...

    def picks(self, reader: Reader) -> Sequence[Pick]:
        """Each answerable question the reader's own rule answers, as each judge picks."""
        ...


def calibrate(
    run: Path,
    traindata: Path,
    evaldata: Path,
    config: TrainConfig,
    word_pick: WordPick,
    served: Served,
    report: Callable[[str], None] = print,
    groups_per_set: int = GROUPS_PER_SET,
) -> dict[str, object]:
    """Fit the blends, the decline rule, the sentence choice and the support threshold for
    ``run/reader.npz`` on up to ``groups_per_set`` calibration groups of each (task, set), and
    the decline rule of each language ``served`` reads questions of on those; writes
    ``run/calibration.json`` and returns its data. ``word_pick`` is word overlap's choice the
    sentence choice is fitted against."""
    reader = _run_reader(run, config, {})
    groups = per_set(calibration_groups(traindata, evaldata, config.seed), groups_per_set, 0)
    report(f"calibrating on {len(groups)} groups")
    signals = [reader.signals(g.task, g.first, g.candidates, g.contexts) for g in groups]
    blends: dict[Judgement, Blend] = {}
    for task in ("answers", "supports"):
        chosen = [i for i, g in enumerate(groups) if g.task == task]
        labels = np.concatenate([groups[i].labels for i in chosen])
        blends[task] = fit_blend(np.concatenate([signals[i] for i in chosen]), labels)
    asked = [i for i, g in enumerate(groups) if g.task == "answers"]
    best = np.concatenate([best_signals(signals[i]) for i in asked])
    answerable = [groups[i].answerable for i in asked]
    blends["answerable"] = fit_blend(best, np.asarray(answerable, dtype=np.float64))
    answerability = blends["answerable"].scores(best)
    words = word_picks(groups, word_pick)
    declines, decline_figures = fit_decline_rules(
        [
            Asked(
                groups[i].language,
                groups[i].answerable,
                float(a),
                words[i].sure,
                groups[i].dataset,
            )
            for i, a in zip(asked, answerability, strict=True)
        ]
    )
    served_rules, served_figures = _served_declines(_run_reader(run, config, blends), served)
    declines |= served_rules
    choices, choice_figures = fit_choices(served.picks(_run_reader(run, config, blends, declines)))
    scores = [blends[g.task].scores(s) for g, s in zip(groups, signals, strict=True)]
    claims = [i for i, g in enumerate(groups) if g.task == "supports"]
    supports, support_figures = fit_support_thresholds(
        [
            0.0 if states_another_number(groups[i].first, [span]) else float(score)
            for i in claims
            for span, score in zip(groups[i].candidates, scores[i], strict=True)
        ],
        [bool(y) for i in claims for y in groups[i].labels],
        [groups[i].language for i in claims for _ in groups[i].labels],
    )
    result: dict[str, object] = {
        "groups": len(groups),
        "blends": {judgement: blend.spec() for judgement, blend in blends.items()},
        "decline": _rounded(declines),
        "decline_figures": decline_figures,
        "served_decline_figures": served_figures,
        "figures": _figures(groups, signals, scores, answerability),
        "sentence_choice": {
            language: dataclasses.asdict(choice) for language, choice in choices.items()
        },
        "sentence_choice_figures": choice_figures,
        "support_threshold": supports,
        "support_figures": support_figures,
    }
    (run / "calibration.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def calibrate_decline(run: Path, config: TrainConfig, served: Served) -> dict[str, object]:
    """Choose again only the decline rule of a calibrated run, of each language ``served``
    reads questions of, its blends, sentence choice and support threshold kept; rewrites
    ``run/calibration.json`` and returns its data. For a reader whose other fits were made on
    articles it had not trained on, which today's calibration part is not for it: the shipped
    reader (run 3) trained on some of today's calibration articles, and its blends and English
    sentence choice fitted again on them lost held-out answers (docs/benchmarks.md, sixteenth
    session)."""
    calibration = json.loads((run / "calibration.json").read_text())
    blends = {j: Blend.from_spec(spec) for j, spec in calibration["blends"].items()}
    rules, figures = _served_declines(_run_reader(run, config, blends), served)
    calibration["decline"] |= _rounded(rules)
    calibration["served_decline_figures"] = figures
    (run / "calibration.json").write_text(json.dumps(calibration, indent=1) + "\n")
    return dict(calibration)


def _run_reader(
    run: Path,
    config: TrainConfig,
    blends: dict[Judgement, Blend],
    declines: dict[str, DeclineRule] | None = None,
) -> CrossEncoderReader:
    """The run's reader with these blends (none: the network's logit alone) and decline rules
    (none: 0.5), built in the run's own model cache, so that building it never replaces the
    shipped reader's build."""
    training = json.loads((run / "training.json").read_text())
    card = ReaderCard(
        name="citewell-reader",
        folder=run,
        delta="reader.npz",
        sha256=training["sha256"],
        layers=config.layers,
        limits=PairLimits(**training["config"]["limits"]),
        blends=blends,
        declines=declines or {},
        choices={},
        supports={},
        fields={},
    )
    return CrossEncoderReader(config.threads, run / "models", card)


def _served_declines(
    reader: Reader, served: Served
) -> tuple[dict[str, DeclineRule], dict[str, dict[str, float]]]:
    """The decline rule, and its figures, of each language whose questions ``served`` reads
    with ``reader`` hold both answerable and unanswerable ones (and ``"*"``, of them all)."""
    reads = served.asked(reader)
    rules, figures = fit_decline_rules(reads)
    mixed = {
        language
        for language in rules
        if len({a.answerable for a in reads if language in ("*", a.language)}) == 2
    }
    return (
        {language: rules[language] for language in mixed},
        {language: figures[language] for language in mixed},
    )


def _rounded(rules: dict[str, DeclineRule]) -> dict[str, dict[str, float]]:
    return {
        language: {side: round(value, 4) for side, value in dataclasses.asdict(rule).items()}
        for language, rule in rules.items()
    }


def fit_blend(signals: Signals, labels: np.ndarray, ridge: float = 1e-3) -> Blend:
    """Logistic regression of ``labels`` on ``signals`` with no weight below zero: each signal
    is evidence for, never against. A negative weight would learn a data set's quirk, not
    reading: SQuAD 2.0's unanswerable questions were written to share their paragraph's words,
    so there more overlap means *less* answerable, and a person asking about a refund window
    would be declined for using the handbook's words. A signal whose weight comes out negative
    is dropped and the others are fit again."""
    used = list(range(signals.shape[1]))
    while True:
        weights, bias = _logistic(signals[:, used], labels, ridge)
        if not len(weights) or weights.min() >= 0:
            break
        del used[int(np.argmin(weights))]
    full = np.zeros(signals.shape[1])
    full[used] = weights
    return Blend(tuple(float(v) for v in full), bias)


def _logistic(signals: Signals, labels: np.ndarray, ridge: float) -> tuple[np.ndarray, float]:
    """Weights and bias by Newton's method (columns standardised while fitting, a small ridge
    on the weights, not the bias)."""
    mean = signals.mean(axis=0)
    spread = signals.std(axis=0) + 1e-6
    x = np.hstack([(signals - mean) / spread, np.ones((len(signals), 1))]).astype(np.float64)
    y = np.asarray(labels, dtype=np.float64)
    w = np.zeros(x.shape[1])
    penalty = np.full(x.shape[1], ridge * len(y))
    penalty[-1] = 0.0
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        gradient = x.T @ (p - y) + penalty * w
        hessian = (x * (p * (1 - p))[:, None]).T @ x + np.diag(penalty) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    weights = w[:-1] / spread
    return weights, float(w[-1] - weights @ mean)


def _figures(
    groups: Sequence[Group],
    signals: Sequence[Signals],
    blended: Sequence[np.ndarray],
    answerability: np.ndarray,
) -> dict[str, dict[str, float]]:
    """Per signal and the blends, over all calibration groups: top-1, answerability and support
    ROC-AUC (a signal's answerability is its best candidate's; the blends are fit on these
    groups: a check, not a measurement)."""
    columns: dict[str, list[np.ndarray]] = {
        name: [s[:, i] for s in signals] for i, name in enumerate(SIGNALS)
    }
    columns["blend"] = list(blended)
    out = {}
    asked = [i for i, g in enumerate(groups) if g.task == "answers"]
    claims = [i for i, g in enumerate(groups) if g.task == "supports"]
    for name, scores in columns.items():
        if name == "blend":
            kept = [groups[i].answerable for i in asked]
            best = list(zip(map(float, answerability), kept, strict=True))
        else:
            best = [(float(scores[i].max()), groups[i].answerable) for i in asked]
        flat = [(s, y) for i in claims for s, y in zip(scores[i], groups[i].labels, strict=True)]
        out[name] = {
            "top1": round(
                top1([groups[i].labels for i in asked], [list(scores[i]) for i in asked]), 4
            ),
            "answerable-auc": round(
                roc_auc([b for b, a in best if a], [b for b, a in best if not a]), 4
            ),
            "support-auc": round(
                roc_auc([s for s, y in flat if y], [s for s, y in flat if not y]), 4
            ),
        }
    return out
