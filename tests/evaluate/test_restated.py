"""Data whose text the canonical form changes (lone CR, CRLF, NUL, a byte-order mark, control
characters) runs: the runner moves every gold range onto the server's text."""

from __future__ import annotations

from pathlib import Path

import pytest

from citewell.evaluate.loaders import Case, DataSet, Document, Evidence, load, restated
from citewell.evaluate.runner import ingest, serving

ODD = "\ufeffRefunds\r\ntake 30 days.\rGift\x00 cards\x01 never expire.\u2028Ask at the desk."
"""A byte-order mark, CRLF, a lone CR, NUL, a control character and a line separator."""


def case_over(document: Document, *snippets: str) -> Case:
    evidence = tuple(
        Evidence(document.filename, document.text.index(s), document.text.index(s) + len(s), s)
        for s in snippets
    )
    return Case(
        id=f"case-{document.filename}",
        language="en",
        question="?",
        answers=(),
        evidence=evidence,
        answerable=True,
        bucket=document.bucket,
        documents=(document.filename,),
    )


def test_ranges_move_with_every_change_of_the_text_parser() -> None:
    document = Document("odd.txt", ODD, "b")
    data = DataSet("odd", [case_over(document, "take 30 days.\rGift", "cards\x01 never")])
    data.add(document)
    stored = "Refunds\ntake 30 days.\nGift cards\x01 never expire.\u2028Ask at the desk."
    moved = restated(data, {("b", "odd.txt"): stored})
    assert [e.text for e in moved.cases[0].evidence] == ["take 30 days.\nGift", "cards\x01 never"]
    assert all(stored[e.start : e.end] == e.text for e in moved.cases[0].evidence)
    assert moved.documents[("b", "odd.txt")].text == stored
    with pytest.raises(ValueError, match="differs from the file"):
        restated(data, {("b", "odd.txt"): stored.replace("Gift", "Gilt")})


def test_rgb_documents_with_lone_carriage_returns_run_through_a_real_server(
    evaldata: Path, tmp_path: Path
) -> None:
    rgb = load("rgb", evaldata / "rgb")
    with_cr = next(d for d in rgb.documents.values() if "\r" in d.text)
    odd = Document("odd.txt", ODD, with_cr.bucket)
    data = DataSet("rgb-cr", [case_over(with_cr, with_cr.text), case_over(odd, "30 days.\rGift")])
    data.add(with_cr)
    data.add(odd)
    with serving(tmp_path / "data") as url:
        _, moved = ingest(data, url, "local")
    whole, part = (c.evidence[0] for c in moved.cases)
    stored = moved.documents[(with_cr.bucket, with_cr.filename)].text
    assert "\r" not in stored and (whole.start, whole.end) == (0, len(stored))
    assert whole.text == with_cr.text.replace("\r\n", "\n").replace("\r", "\n").strip()
    assert part.text == "30 days.\nGift"
