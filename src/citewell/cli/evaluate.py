"""``eval``: citation quality on a data set, through a real server."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import click

import citewell
from citewell.cli.common import RequestFailed, main
from citewell.evaluate.loaders import LOADERS, Articles
from citewell.progress import Progress


@main.command("eval")
@click.argument("dataset", type=click.Choice(sorted(LOADERS)))
@click.option(
    "--path",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="The data set's folder. [default: its folder under CITEWELL_EVALDATA_DIR]",
)
@click.option("--split", default="dev", show_default=True, help="Which files of the folder.")
@click.option("--limit", type=click.IntRange(0), default=0, help="First N questions per language.")
@click.option("--language", help="Only the questions in this language (en, es, zh).")
@click.option(
    "--articles",
    type=click.Choice(["all", "held-out", "tune"]),
    default="all",
    show_default=True,
    help="Only the questions on the held-out half of the articles (the reader's validation, "
    "what bench/answers.py reports on), or on the other half.",
)
@click.option(
    "--surface",
    type=click.Choice(["responses", "chat", "messages"]),
    default="responses",
    show_default=True,
    help="The API the questions are asked through, with its official SDK.",
)
@click.option("--url", help="A running server. [default: start one on a fresh data folder]")
@click.option("--api-key", envvar="CITEWELL_API_KEY", default="citewell", help="Key sent.")
@click.option(
    "--generator",
    default="extractive",
    show_default=True,
    help="Generator of the default agent of the server started (`serve --generator`); with "
    "--url only recorded in the report.",
)
@click.option("--model", default="citewell-agent", show_default=True, help="Agent asked.")
@click.option("--json", "json_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--html", "html_file", type=click.Path(dir_okay=False, path_type=Path))
def eval_(
    dataset: str,
    path: Path | None,
    split: str,
    limit: int,
    language: str | None,
    articles: Articles,
    surface: str,
    url: str | None,
    api_key: str,
    generator: str,
    model: str,
    json_file: Path | None,
    html_file: Path | None,
) -> None:
    """Run DATASET through a server and report retrieval, citation, refusal and answer figures
    per language, with 95% confidence intervals."""
    from citewell.evaluate.loaders import load
    from citewell.evaluate.report import html_page, summary
    from citewell.evaluate.runner import evaluate

    if path is None:
        root = os.environ.get("CITEWELL_EVALDATA_DIR")
        if not root:
            raise click.UsageError("give --path, or set CITEWELL_EVALDATA_DIR")
        path = Path(root) / LOADERS[dataset][0]
    try:
        data = load(dataset, path, split).select(limit=limit, language=language, articles=articles)
    except (OSError, KeyError, ValueError) as exc:
        raise RequestFailed(f"cannot read {dataset} from {path}: {exc}") from exc
    meta = {
        "dataset": dataset,
        "path": str(path),
        "split": split,
        "limit": limit,
        "language": language,
        "articles": articles,
        "generator": generator,
        "model": model,
        "url": url,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "citewell": citewell.__version__,
    }
    bars: dict[str, Progress] = {}

    def progress(stage: str, done: int, total: int) -> None:
        if stage not in bars:
            bars[stage] = Progress(
                stage, total, unit="documents" if stage == "ingest" else "questions"
            )
        bars[stage].update_to(done, total)

    try:
        report = evaluate(
            data,
            surface=surface,  # type: ignore[arg-type]
            url=url,
            api_key=api_key,
            model=model,
            meta=meta,
            generator=None if url else generator,
            progress=progress,
        )
    except (ValueError, RuntimeError, OSError) as exc:
        raise RequestFailed(str(exc)) from exc
    finally:
        for bar in bars.values():
            bar.close()
    if json_file:
        json_file.write_text(json.dumps(report, ensure_ascii=False, indent=1), encoding="utf-8")
    if html_file:
        html_file.write_text(html_page(report), encoding="utf-8")
    click.echo(f"{dataset} ({split}): {len(data.cases)} questions, {surface} surface")
    click.echo(summary(report))
    if report["errors"]:
        click.echo(f"{report['errors']} questions failed; see the JSON report", err=True)
