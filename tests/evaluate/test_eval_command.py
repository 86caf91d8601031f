"""``citewell eval`` end to end: a real server started on a fresh data folder, asked over HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from citewell.evaluate.metrics import FIGURES

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_eval_xquad_reports_every_figure_per_language(evaldata: Path, tmp_path: Path) -> None:
    report_file, page = tmp_path / "report.json", tmp_path / "report.html"
    command = [
        str(Path(sys.executable).with_name("citewell")),
        "eval",
        "xquad",
        "--path",
        str(evaldata / "xquad"),
        "--limit",
        "5",
        "--json",
        str(report_file),
        "--html",
        str(page),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads(report_file.read_text(encoding="utf-8"))
    assert report["meta"]["cases"] == 15
    assert report["errors"] == 0
    assert set(report["figures"]) == {"en", "es", "zh", "all"}
    for language, figures in report["figures"].items():
        assert set(figures) == set(FIGURES)
        assert figures["retrieval_hit_rate"]["n"] == (15 if language == "all" else 5)
        assert figures["refusal_unanswerable"]["n"] == 0  # XQuAD has no unanswerable questions
    answered = [c for c in report["cases"] if not c["outcome"]["declined"]]
    assert answered and all(c["outcome"]["citations"] for c in answered)
    assert "contains_gold" in done.stdout
    # Not a terminal: plain progress lines, no bar's carriage returns or cursor escapes.
    assert "\r" not in done.stderr and "\x1b[" not in done.stderr
    html = page.read_text(encoding="utf-8")
    assert html.count("<tr>") == 16 and report["cases"][0]["case"]["question"] in html
