"""Every registered parser, run on a sample of its format, keeps the ParserContract."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from citewell.config import IngestSettings
from citewell.ingest import SUPPORTED_MEDIA_TYPES, parse
from citewell.ingest.base import ParsedDocument
from tests.contracts.parser import ParserContract
from tests.ingest.samples import PageSpec, Run, make_pdf

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def _file(*parts: str) -> Callable[[Path], tuple[str, bytes]]:
    return lambda documents: (parts[-1], documents.joinpath(*parts).read_bytes())


def _inline(name: str, data: bytes) -> Callable[[Path], tuple[str, bytes]]:
    return lambda documents: (name, data)


_CONTINUED = make_pdf(
    [
        PageSpec([Run("Title", 72, 700, size=18), Run("A sentence that runs", 72, 670)]),
        PageSpec(image=True),
        PageSpec([Run("Open sentence", 72, 700)], rotate=90),
        PageSpec([Run("continues here.", 72, 700)], rotate=270, image=True),
    ]
)

# (media type, sample) pairs; every registered media type needs at least one.
SAMPLES: list[tuple[str, Callable[[Path], tuple[str, bytes]]]] = [
    ("text/plain", _file("pdf_scanned", "ocrmypdf_linn.groundtruth.txt")),
    ("text/markdown", _file("groundtruth_docling", "word_sample.docx.md")),
    ("text/markdown", _file("groundtruth_docling", "multi_page.md")),
    ("text/html", _file("docx_html", "unstructured_eng_spa_mult.html")),
    (DOCX, _file("docx_html", "word_sample.docx")),
    (DOCX, _file("docx_html", "unit_test_headers.docx")),
    ("application/pdf", _file("pdf_text", "multi_page.pdf")),
    ("application/pdf", _file("pdf_text", "amt_handbook_sample.pdf")),
    ("application/pdf", _file("pdf_scanned", "ocrmypdf_cardinal.pdf")),
    ("application/pdf", _inline("built.pdf", _CONTINUED)),
    ("text/csv", _inline("plans.csv", b"Plan,Price\nPro,$20\n,\nFree,0\n")),
    ("text/tab-separated-values", _inline("terms.tsv", b"term\tmeaning\nA\tletter\n")),
    ("application/json", _inline("items.json", b'[{"a": {"b": [1, 2]}}, {"c": null}, {"d": 1}]')),
    ("application/x-ndjson", _inline("items.jsonl", b'{"q": "why"}\n\n{"q": "how"}\n')),
]


def test_every_registered_media_type_has_a_sample() -> None:
    assert {kind for kind, _ in SAMPLES} == set(SUPPORTED_MEDIA_TYPES)


class TestRegisteredParsers(ParserContract):
    @pytest.fixture(params=SAMPLES, ids=lambda sample: sample[0])
    def parsed(self, request: pytest.FixtureRequest, documents: Path) -> ParsedDocument:
        media_type, load = request.param
        filename, data = load(documents)
        return parse(data, filename=filename, limits=IngestSettings(), media_type=media_type)
