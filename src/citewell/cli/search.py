"""``search`` without generation and ``ask`` for a cited answer, printed as a table or JSON."""

from __future__ import annotations

import json
import shutil
import unicodedata
from typing import TYPE_CHECKING

import click

from citewell.cli.common import (
    RequestFailed,
    echo_json,
    json_option,
    main,
    with_engine,
    with_library,
)
from citewell.locator import locator_label, source_label
from citewell.model import Agent, Principal, RetrievalMode, SearchRequest

if TYPE_CHECKING:
    from citewell.engine import Engine
    from citewell.library import Library
    from citewell.render.records import SearchResults


@main.command()
@click.argument("query")
@click.option(
    "--bucket", "buckets", multiple=True, required=True, help="Bucket searched (repeatable)."
)
@click.option("--max-results", type=click.IntRange(1, 100), default=10, show_default=True)
@click.option(
    "--mode",
    type=click.Choice([m.value for m in RetrievalMode]),
    default=RetrievalMode.HYBRID.value,
    show_default=True,
    help="Retrievers used.",
)
@click.option("--include-superseded", is_flag=True, help="Search older versions of files too.")
@click.option("--filters", metavar="JSON", help="A filter, as in the HTTP API.")
@json_option
@with_library
def search(
    query: str,
    buckets: tuple[str, ...],
    max_results: int,
    mode: str,
    include_superseded: bool,
    filters: str | None,
    as_json: bool,
    library: Library,
) -> None:
    """Search buckets: ranked passages with their best sentence and where it is."""
    from citewell.render.records import render_results

    try:
        request = SearchRequest.model_validate(
            {
                "query": query,
                "bucket_ids": buckets,
                "filters": json.loads(filters) if filters else None,
                "max_results": max_results,
                "mode": mode,
                "include_superseded": include_superseded,
            }
        )
    except ValueError as exc:  # invalid JSON, or a filter or query the model refuses
        raise RequestFailed(f"invalid search: {exc}") from exc
    results = render_results(query, library.search(request))
    if as_json:
        echo_json(results.model_dump(mode="json"))
    elif not results.data:
        click.echo("No passages found.")
    else:
        click.echo("\n".join(_table(results, shutil.get_terminal_size((100, 24)).columns)))


@main.command()
@click.argument("question")
@click.option(
    "--bucket", "buckets", multiple=True, help="Bucket answered from (repeatable). [default: all]"
)
@click.option("--generator", help="Generator that writes the answer. [default: extractive]")
@click.option("--model", help="Model name passed to the generator.")
@click.option("--strict", is_flag=True, help="Remove claims no citation supports.")
@json_option
@with_engine
def ask(
    question: str,
    buckets: tuple[str, ...],
    generator: str | None,
    model: str | None,
    strict: bool,
    as_json: bool,
    engine: Engine,
) -> None:
    """Answer a question from the buckets, each sentence citing where it comes from."""
    import anyio

    from citewell.events import Question
    from citewell.render.common import AnswerOptions, layout

    policy = {"generator": generator, "model": model, "strict": strict or None}
    agent = Agent.model_validate({k: v for k, v in policy.items() if v is not None})
    asked = Question(question, bucket_ids=buckets or None)
    answer = anyio.run(lambda: engine.ask(asked, agent=agent, principal=Principal.local()))
    if as_json:
        echo_json(answer.model_dump(mode="json"))
        return
    options = AnswerOptions(
        id=answer.id,
        model=agent.name,
        created_at=int(answer.created_at.timestamp()),
        citation_compat="legacy",
        sources_appendix="include",
    )
    click.echo(layout(answer, options).text)


def _table(results: SearchResults, width: int) -> list[str]:
    """Rank, score, where the best sentence is, and the sentence; one line each, fitted to width.

    The location is the best sentence's own (a passage may start a page earlier).
    """
    rows = []
    for result in results.data:
        best = result.sentences[0] if result.sentences else None
        locator = (
            locator_label(
                page_number=best.page_number,
                page_label=best.page_label,
                heading_path=result.heading_path,
            )
            if best
            else result.locator_label
        )
        label = _shorten(source_label(result.filename, locator), 40)
        rows.append((result.score, label, best.text if best else result.text))
    label_width = max(_width(label) for label in ["source", *(row[1] for row in rows)])
    sentence_width = max(30, width - label_width - 14)
    lines = [f"{'#':>3}  {'score':<5}  {_pad('source', label_width)}  best sentence"]
    for rank, (score, label, sentence) in enumerate(rows, start=1):
        shown = _shorten(sentence, sentence_width)
        lines.append(f"{rank:>3}  {score:.3f}  {_pad(label, label_width)}  {shown}")
    return lines


def _width(text: str) -> int:
    """Columns taken on a terminal: wide (CJK) characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(text: str, width: int) -> str:
    return text + " " * (width - _width(text))


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    if _width(text) <= width:
        return text
    out, used = "", 0
    for char in text:
        used += _width(char)
        if used > width - 1:
            break
        out += char
    return out.rstrip() + "…"
