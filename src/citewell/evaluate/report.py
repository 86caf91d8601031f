"""An evaluation run's report: a JSON document, a summary table, and an HTML page with one row
per question (answer, citations and gold evidence side by side)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from citewell.cite.writer import REFUSALS
from citewell.evaluate.loaders import Case
from citewell.evaluate.metrics import FIGURES, Figure, Outcome, figures, supported

__all__ = ["build", "html_page", "summary"]


def by_language(pairs: Sequence[tuple[Case, Outcome]]) -> dict[str, dict[str, Figure]]:
    """The figures per language, then over all cases (``all``)."""
    languages = sorted({c.language for c, _ in pairs})
    refusals = tuple(REFUSALS.values())
    out = {
        lang: figures([p for p in pairs if p[0].language == lang], refusals) for lang in languages
    }
    if len(languages) > 1:
        out["all"] = figures(pairs, refusals)
    return out


def build(
    meta: Mapping[str, Any], cases: Sequence[Case], outcomes: Sequence[Outcome]
) -> dict[str, Any]:
    """The JSON report: ``meta``, ``figures`` (language → figure → value/low/high/n) and
    ``cases`` (each case with its outcome)."""
    pairs = list(zip(cases, outcomes, strict=True))
    return {
        "meta": dict(meta),
        "figures": {
            lang: {k: f.as_dict() for k, f in figs.items()}
            for lang, figs in by_language(pairs).items()
        },
        "errors": sum(o.error is not None for o in outcomes),
        "cases": [
            {
                "case": asdict(case),
                "outcome": asdict(outcome),
                "supported": [supported(case, c) for c in outcome.citations],
            }
            for case, outcome in pairs
        ],
    }


def _cell(figure: Mapping[str, Any]) -> str:
    if figure["value"] is None:
        return "-"
    return f"{figure['value']:.3f} [{figure['low']:.3f}, {figure['high']:.3f}] n={figure['n']}"


def summary(report: Mapping[str, Any]) -> str:
    """A plain-text table: one line per figure, one column per language (value [95% CI] n)."""
    columns = [["figure", *FIGURES]]
    for lang, figs in report["figures"].items():
        columns.append([lang, *(_cell(figs[name]) for name in FIGURES)])
    widths = [max(len(cell) for cell in column) for column in columns]
    lines = []
    for index, row in enumerate(zip(*columns, strict=True)):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse;width:100%}
td,th{border:1px solid #ccc;padding:.4em;vertical-align:top;font-size:.9em}
th{background:#f3f3f3;text-align:left}.ok{background:#e8f6e8}.bad{background:#fbe9e9}
.meta{color:#555}mark{background:#fff2a8}
"""


def html_page(report: Mapping[str, Any]) -> str:
    """A standalone page: the summary, then one row per question."""
    e = html.escape
    meta = report["meta"]
    parts = [
        "<!doctype html><meta charset=utf-8>",
        f"<title>citewell eval {e(str(meta.get('dataset', '')))}</title><style>{STYLE}</style>",
        f"<h1>citewell eval: {e(str(meta.get('dataset', '')))}</h1>",
        "<p class=meta>" + e(", ".join(f"{k}={v}" for k, v in meta.items())) + "</p>",
        f"<pre>{e(summary(report))}</pre>",
        "<table><tr><th>case</th><th>question</th><th>answer</th><th>citations</th>"
        "<th>gold answers</th><th>gold evidence</th></tr>",
    ]
    for row in report["cases"]:
        case, outcome = row["case"], row["outcome"]
        status = "answerable" if case["answerable"] else "unanswerable"
        if outcome["error"]:
            answer = f"<b>error</b>: {e(outcome['error'])}"
        else:
            answer = e(outcome["text"]) + (" <i>(declined)</i>" if outcome["declined"] else "")
        citations = "".join(
            f"<div class={'ok' if ok else 'bad'}>{e(c['filename'])} "
            f"[{c['start']}:{c['end']}] «{e(c['cited_text'])}»</div>"
            for c, ok in zip(outcome["citations"], row["supported"], strict=True)
        )
        evidence = "".join(
            f"<div>{e(g['filename'])} [{g['start']}:{g['end']}] «{e(g['text'][:500])}»</div>"
            for g in case["evidence"]
        )
        golds = "<br>".join(e(a) for a in case["answers"])
        parts.append(
            f"<tr><td>{e(case['id'])}<br><small>{case['language']}, {status}, "
            f"{outcome['ms']:.0f} ms</small></td><td>{e(case['question'])}</td>"
            f"<td>{answer}</td><td>{citations}</td><td>{golds}</td><td>{evidence}</td></tr>"
        )
    parts.append("</table>")
    return "\n".join(parts)
