"""Every registered parser, run on a sample of its format, keeps the ParserContract."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PIL import Image

from citewell.config import IngestSettings, OcrSettings
from citewell.ingest import SUPPORTED_MEDIA_TYPES, parse
from citewell.ingest.base import ParsedDocument
from citewell.ingest.ocr import Ocr, Recogniser
from tests.contracts.parser import ParserContract
from tests.ingest.samples import PageSpec, Run, make_pdf

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def _file(*parts: str) -> Callable[[Path], tuple[str, bytes]]:
    return lambda documents: (parts[-1], documents.joinpath(*parts).read_bytes())


def _inline(name: str, data: bytes) -> Callable[[Path], tuple[str, bytes]]:
    return lambda documents: (name, data)


def _converted(name: str, kind: str) -> Callable[[Path], tuple[str, bytes]]:
    """The poster of easyocr_english.png saved as another kind of image."""

    def load(documents: Path) -> tuple[str, bytes]:
        buffer = io.BytesIO()
        with Image.open(documents / "images" / "easyocr_english.png") as image:
            image.convert("RGB").save(buffer, kind)
        return name, buffer.getvalue()

    return load


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
    ("application/pdf", _file("pdf_scanned", "docling_ocr_test.pdf")),
    ("application/pdf", _inline("built.pdf", _CONTINUED)),
    ("text/csv", _inline("plans.csv", b"Plan,Price\nPro,$20\n,\nFree,0\n")),
    ("text/tab-separated-values", _inline("terms.tsv", b"term\tmeaning\nA\tletter\n")),
    ("application/json", _inline("items.json", b'[{"a": {"b": [1, 2]}}, {"c": null}, {"d": 1}]')),
    ("application/x-ndjson", _inline("items.jsonl", b'{"q": "why"}\n\n{"q": "how"}\n')),
    ("image/png", _file("images", "easyocr_english.png")),
    ("image/jpeg", _file("images", "easyocr_chinese.jpg")),
    ("image/tiff", _converted("poster.tiff", "TIFF")),
    ("image/webp", _converted("poster.webp", "WEBP")),
]


def test_every_registered_media_type_has_a_sample() -> None:
    assert {kind for kind, _ in SAMPLES} == set(SUPPORTED_MEDIA_TYPES)


@pytest.fixture(scope="module")
def ocr() -> Iterator[Ocr]:
    recogniser = Recogniser(OcrSettings(workers=1))
    yield Ocr(recogniser)
    recogniser.close()


# Each sample is parsed once for all the contract's tests: OCR takes a while.
@pytest.fixture(scope="module", params=SAMPLES, ids=lambda sample: sample[0])
def parsed(request: pytest.FixtureRequest, evaldata: Path, ocr: Ocr) -> ParsedDocument:
    media_type, load = request.param
    filename, data = load(evaldata / "documents")
    return parse(data, filename=filename, limits=IngestSettings(), media_type=media_type, ocr=ocr)


class TestRegisteredParsers(ParserContract):
    """Every sample above, through the registry (with OCR), keeps the parser contract."""
