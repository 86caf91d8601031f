"""OCR: character error rate per scanned document and image, and pages per second.

CER is the edit distance (Levenshtein: insertions, deletions, substitutions of code points)
between the canonical text citewell stores for a document and its reference transcription,
divided by the reference's length. Both texts are normalised first: every run of whitespace
(spaces, line breaks) becomes one space, and the ends are trimmed; case, punctuation and
hyphenation are kept. References: pdf_scanned/ocrmypdf_linn.groundtruth.txt for the LinnSequencer
page (linn.pdf, skew.pdf, each page of cardinal.pdf, images/ocrmypdf_linn.png), the sentence
the data README gives for docling_ocr_test.pdf. The EasyOCR images have no reference text:
what was read is printed instead.

Tilt: CER of the LinnSequencer page tilted — skew.pdf, and images/ocrmypdf_linn.png turned a
few degrees (counter-clockwise for positive angles, by PIL, padded white) — read as citewell
reads it (turned level first, "tilt found" being the turn that levels it) and read as given
(``MIN_SKEW`` set out of reach, which is how citewell read every page before).

Throughput: documents parsed through ``citewell.ingest.parse`` (PDF pages rendered at the
default 300 dpi, OSD, recognition, layout), wall time over all pages, with 1 and 2 OCR workers in
the same run; text PDFs (no OCR) for comparison.

    .venv/bin/python bench/ocr.py
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from unittest.mock import patch

import numpy as np
import pypdfium2
from PIL import Image

from citewell.config import IngestSettings, OcrSettings
from citewell.ingest import ocr, parse
from citewell.ingest.base import ParsedDocument
from citewell.ingest.ocr import Ocr, PageText, Recogniser
from common import evaldata_dir, machine, reproduce_line, table

LIMITS = IngestSettings()
TILTS = (-8.0, -5.0, -2.0, -1.0, -0.5, 0.5, 1.0, 2.0, 5.0, 8.0)
DOCLING_SENTENCE = (
    "Docling bundles PDF document conversion to JSON and Markdown in an easy self contained package"
)


def normalise(text: str) -> str:
    return " ".join(text.split())


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance, one row of the table at a time in numpy.

    Within a row, ``cur[j] = min(base[j], cur[j-1] + 1)`` unrolls to a running minimum of
    ``base[k] - k`` plus ``j``, so no Python loop runs over the columns.
    """
    if not a or not b:
        return len(a) + len(b)
    codes_b = np.frombuffer(b.encode("utf-32-le"), dtype=np.uint32)
    index = np.arange(len(b) + 1)
    previous = index.copy()
    for i, char in enumerate(a, start=1):
        base = np.empty(len(b) + 1, dtype=np.int64)
        base[0] = i
        substitute = previous[:-1] + (codes_b != ord(char))
        base[1:] = np.minimum(previous[1:] + 1, substitute)
        previous = np.minimum.accumulate(base - index) + index
    return int(previous[-1])


def cer(hypothesis: str, reference: str) -> float:
    ref = normalise(reference)
    return edit_distance(normalise(hypothesis), ref) / len(ref)


def _page_texts(document: ParsedDocument) -> list[str]:
    return [document.text[p.span.start : p.span.end] for p in document.pages]


def accuracy(documents: Path, recogniser: Recogniser) -> None:
    linn = (documents / "pdf_scanned" / "ocrmypdf_linn.groundtruth.txt").read_text()
    cases = [
        ("pdf_scanned/ocrmypdf_linn.pdf", linn),
        ("pdf_scanned/ocrmypdf_skew.pdf", linn),
        ("pdf_scanned/ocrmypdf_cardinal.pdf", linn),
        ("pdf_scanned/docling_ocr_test.pdf", DOCLING_SENTENCE),
        ("images/ocrmypdf_linn.png", linn),
    ]
    rows = []
    for name, reference in cases:
        path = documents / name
        document = parse(path.read_bytes(), filename=path.name, limits=LIMITS, ocr=Ocr(recogniser))
        for number, text in enumerate(_page_texts(document), start=1):
            label = name if len(document.pages) == 1 else f"{name} p{number}"
            rows.append(
                (label, len(normalise(reference)), len(normalise(text)), cer(text, reference))
            )
    print(table(rows, ("document", "reference chars", "read chars", "CER")))
    print()
    for name in ("images/easyocr_english.png", "images/easyocr_chinese.jpg"):
        path = documents / name
        document = parse(path.read_bytes(), filename=path.name, limits=LIMITS, ocr=Ocr(recogniser))
        print(f"{name} (no reference): {normalise(document.text)!r}")


def tilt(documents: Path, recogniser: Recogniser) -> None:
    linn = (documents / "pdf_scanned" / "ocrmypdf_linn.groundtruth.txt").read_text()
    pdf = pypdfium2.PdfDocument(documents / "pdf_scanned" / "ocrmypdf_skew.pdf")
    skewed = pdf[0].render(scale=300 / 72, grayscale=True).to_pil().copy()  # as ingest does
    pages = [("pdf_scanned/ocrmypdf_skew.pdf", skewed)]
    with Image.open(documents / "images" / "ocrmypdf_linn.png") as image:
        upright = image.convert("L")
    for degrees in TILTS:
        turned = upright.rotate(degrees, Image.Resampling.BICUBIC, expand=True, fillcolor=255)
        pages.append((f"images/ocrmypdf_linn.png turned {degrees:+g}°", turned))
    rows = []
    for label, page in pages:
        level = _read(recogniser, page)
        with patch.object(ocr, "MIN_SKEW", math.inf):
            as_given = _read(recogniser, page)
        rows.append(
            (label, f"{level.skew:+.2f}", cer(_words(level), linn), cer(_words(as_given), linn))
        )
    print(table(rows, ("page", "tilt found (°)", "CER level", "CER as given")))


def _read(recogniser: Recogniser, image: Image.Image) -> PageText:
    (page,) = recogniser.read([lambda: image])
    return page


def _words(page: PageText) -> str:
    return " ".join(w.text for p in page.paragraphs for line in p.lines for w in line.words)


def _pages_per_second(paths: list[Path], recogniser: Recogniser | None) -> tuple[int, float]:
    ocr = Ocr(recogniser) if recogniser is not None else None
    started = time.perf_counter()
    pages = 0
    for path in paths:
        pages += len(parse(path.read_bytes(), filename=path.name, limits=LIMITS, ocr=ocr).pages)
    return pages, pages / (time.perf_counter() - started)


def throughput(documents: Path) -> None:
    text_pdfs = [documents / "pdf_text" / n for n in ("multi_page.pdf", "amt_handbook_sample.pdf")]
    scans = [
        documents / "pdf_scanned" / n
        for n in ("ocrmypdf_linn.pdf", "ocrmypdf_skew.pdf", "ocrmypdf_cardinal.pdf")
    ]
    rows = []
    pages, rate = _pages_per_second(text_pdfs * 5, None)
    rows.append(("text PDFs (no OCR)", "-", pages, rate))
    rates = {}
    for workers, detect in ((1, True), (2, True), (1, False)):
        recogniser = Recogniser(OcrSettings(workers=workers, detect_script=detect))
        _pages_per_second(scans[:1], recogniser)  # load the models of each worker first
        pages, rate = _pages_per_second(scans, recogniser)
        recogniser.close()
        label = "scanned PDFs (OCR)" + ("" if detect else ", detect_script off")
        rows.append((label, workers, pages, rate))
        rates[(workers, detect)] = rate
    print(table(rows, ("documents", "OCR workers", "pages", "pages/s")))
    print(
        f"\n2 workers / 1 worker: {rates[(2, True)] / rates[(1, True)]:.2f}x; "
        f"detect_script on / off: {rates[(1, True)] / rates[(1, False)]:.2f}x; "
        f"text / OCR (1 worker): {rows[0][3] / rates[(1, True)]:.0f}x"
    )


def main() -> None:
    documents = evaldata_dir() / "documents"
    print(machine())
    print(reproduce_line())
    print()
    recogniser = Recogniser(OcrSettings(workers=2))
    try:
        accuracy(documents, recogniser)
        print()
        tilt(documents, recogniser)
    finally:
        recogniser.close()
    print()
    throughput(documents)


if __name__ == "__main__":
    main()
