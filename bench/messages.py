"""Grounded answers over the Anthropic Messages surface (``POST /v1/messages``), with documents.

Data: XQuAD (development split, en/es/zh), the held-out articles of bench/answers.py (the same
split by a hash of the title, the same loaders and gold ranges). Nothing is ingested: each
question is sent with its own article as ``document`` blocks (plain-text sources, citations
enabled), through the official ``anthropic`` SDK, to a server the bench starts
(``citewell serve --port 0`` on an empty data folder). ``--unit article`` sends the article as one
document (its paragraphs joined by blank lines, the text bench/answers.py ingests);
``--unit paragraphs`` sends one document per paragraph.

Figures, as bench/answers.py reports them: the share of answerable questions whose answer
contains a gold answer; citation precision (the share of ``char_location`` citations, over
answers given, whose range of the cited document overlaps a gold answer's range; a paragraph's
range is mapped back to the article); completeness (the share of the non-blank text blocks of
the answers given that carry a citation: the extractive generator states evidence sentences,
each its own block); false refusals (XQuAD has no unanswerable questions); latency p50/p95 of
the SDK call, client and server on the same machine. Every citation's ``cited_text`` is also
checked against the slice of the document its range names.

    .venv/bin/python bench/messages.py                      # held-out articles, en/es/zh
    .venv/bin/python bench/messages.py --unit paragraphs    # one document per paragraph
    .venv/bin/python bench/messages.py --stream --limit 50  # messages.stream(), first 50 each
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from answers import HEADER, DataSet, Outcome, load, row, serving
from citewell.cite.writer import REFUSALS
from citewell.config import RetrieveSettings, Settings
from citewell.evaluate.loaders import Case
from citewell.model import Span
from common import evaldata_dir, machine, percentile, reproduce_line, table

SETS = ("xquad-en", "xquad-es", "xquad-zh")
AGENT = "citewell-agent"


@dataclass(frozen=True)
class Part:
    """One document block: a range of the article's text, sent as a plain-text source."""

    filename: str
    offset: int
    text: str


def parts_of(data: DataSet, item: Case, unit: str) -> list[Part]:
    filename = _filename(item)
    text = data.documents[filename]
    if unit == "article":
        return [Part(filename, 0, text)]
    parts, offset = [], 0
    for paragraph in text.split("\n\n"):
        parts.append(Part(filename, offset, paragraph))
        offset += len(paragraph) + 2
    if "\n\n".join(p.text for p in parts) != text:
        raise SystemExit(f"paragraphs of {filename} do not make up its text")
    return parts


def _filename(item: Case) -> str:
    """The source file of the item's article."""
    return item.documents[0]


@dataclass
class Checks:
    """Whether each cited_text was the document slice its range names."""

    citations: int = 0
    exact: int = 0


Asker = Callable[[Case], Outcome]


def messages_asker(
    url: str, api_key: str, data: DataSet, unit: str, stream: bool, checks: Checks
) -> Asker:
    import anthropic

    client = anthropic.Anthropic(base_url=url.rstrip("/"), api_key=api_key, max_retries=0)
    refusals = tuple(REFUSALS.values())

    def ask(item: Case) -> Outcome:
        parts = parts_of(data, item, unit)
        documents: list[Any] = [
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": p.text},
                "title": p.filename,
                "citations": {"enabled": True},
            }
            for p in parts
        ]
        content = [*documents, {"type": "text", "text": item.question}]
        request: dict[str, Any] = {
            "model": AGENT,
            "max_tokens": 1024,
            "messages": [{"role": "user", "content": content}],
        }
        started = time.perf_counter()
        if stream:
            with client.messages.stream(**request) as events:
                message = events.get_final_message()
        else:
            message = client.messages.create(**request)
        ms = (time.perf_counter() - started) * 1000
        blocks = [b for b in message.content if b.type == "text"]
        text = "".join(b.text for b in blocks)
        declined = text.strip().endswith(refusals)
        citations: list[tuple[str, Span]] = []
        cited_blocks = 0
        for block in blocks:
            cited = [c for c in block.citations or [] if c.type == "char_location"]
            cited_blocks += bool(cited)
            for c in cited:
                part = parts[c.document_index]
                checks.citations += 1
                checks.exact += c.cited_text == part.text[c.start_char_index : c.end_char_index]
                span = Span(
                    start=part.offset + c.start_char_index, end=part.offset + c.end_char_index
                )
                citations.append((part.filename, span))
        stating = 0 if declined else sum(1 for b in blocks if b.text.strip())
        return Outcome(text, tuple(citations), stating, cited_blocks, declined, ms)

    return ask


def answer_all(ask: Asker, items: Sequence[Case]) -> list[Outcome]:
    """Every question in turn, after three untimed warm-up questions."""
    for warm_up in items[:3]:
        ask(warm_up)
    return [ask(item) for item in items]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    parser.add_argument("--split", choices=["held-out", "tune", "all"], default="held-out")
    parser.add_argument("--unit", choices=["article", "paragraphs"], default="article")
    parser.add_argument("--stream", action="store_true", help="use messages.stream()")
    parser.add_argument("--embedder", choices=["e5-small", "use"], default="e5-small")
    parser.add_argument(
        "--http", metavar="URL", help="ask a running server instead of starting one"
    )
    parser.add_argument("--api-key", default="bench", help="key sent over HTTP")
    parser.add_argument("--limit", type=int, default=0, help="first N questions of each set")
    args = parser.parse_args()
    print(f"# bench/messages.py — {time.strftime('%Y-%m-%d')} — {machine()}")
    import anthropic

    evaldata = evaldata_dir()
    rows, checks = [], Checks()
    with tempfile.TemporaryDirectory(prefix="citewell-bench-messages-") as folder:
        settings = Settings(
            data_dir=Path(folder), retrieve=RetrieveSettings(embedder=args.embedder, threads=1)
        )
        with serving(settings) if not args.http else nullcontext(args.http) as url:
            for name in args.sets:
                data = load(evaldata, name).split(args.split)
                if args.limit:
                    data.items = data.items[: args.limit]
                ask = messages_asker(url, args.api_key, data, args.unit, args.stream, checks)
                outcomes = answer_all(ask, data.items)
                rows.append(row(data, outcomes))
                times = [o.ms for o in outcomes]
                print(f"  {name}: {len(outcomes)} questions, p50 {percentile(times, 50):.0f} ms")
    how = "messages.stream()" if args.stream else "messages.create()"
    print(
        f"\n{args.split} articles, POST /v1/messages, one document per {args.unit.rstrip('s')}"
        f" (anthropic {anthropic.__version__}, {how}):"
    )
    print(table(rows, HEADER))
    print(f"\ncited_text equal to the document slice: {checks.exact}/{checks.citations}")
    print("\n" + reproduce_line())


if __name__ == "__main__":
    main()
