"""OCR of images and of PDF pages without a text layer, with real tesseract on real files.

Inputs are one page each where possible: tesseract takes seconds a page on a shared machine.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pypdfium2
import pytest
from PIL import Image

from citewell.config import IngestSettings, OcrSettings
from citewell.errors import ConfigError, FileTooLarge, ParseError
from citewell.ingest import ocr, parse
from citewell.ingest.base import ParsedDocument
from citewell.ingest.ocr import Box, Ocr, PageText, Recogniser, Word
from citewell.model import NOT_READ, Modality
from tests.ingest.samples import PageSpec, Run, make_pdf

LIMITS = IngestSettings()
POSTER_PHRASE = "Reduce your risk of coronavirus infection"
LINN_FIRST_LINE = "The LinnSequencer is a state-of-the-art composition and performance tool"
LINN_LAST_BULLET = "TEMPO CHANGES may be programmed into a sequence, with smooth transitions"


@pytest.fixture(scope="module")
def recogniser() -> Iterator[Recogniser]:
    recogniser = Recogniser(OcrSettings(workers=1))
    yield recogniser
    recogniser.close()


def _parse(data: bytes, filename: str, recogniser: Recogniser) -> ParsedDocument:
    return parse(data, filename=filename, limits=LIMITS, ocr=Ocr(recogniser))


def _page_of_pdf(path: Path, index: int) -> bytes:
    """Page ``index`` of a PDF as a PDF of its own."""
    source = pypdfium2.PdfDocument(path)
    target = pypdfium2.PdfDocument.new()
    target.import_pages(source, [index])
    buffer = io.BytesIO()
    target.save(buffer)
    return buffer.getvalue()


def _phrase_boxes(document: ParsedDocument, phrase: str) -> tuple[int, np.ndarray]:
    """The page number of ``phrase`` (a line break may stand for a space) and its characters'
    boxes."""
    start = document.text.replace("\n", " ").find(phrase)
    assert start >= 0, document.text[:500]
    page = next(p for p in document.pages if p.span.start <= start < p.span.end)
    rows = document.char_boxes[page.number - 1]
    offset = start - page.span.start
    return page.number, rows[offset : offset + len(phrase)]


# --- images --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def poster(evaldata: Path, recogniser: Recogniser) -> ParsedDocument:
    data = (evaldata / "documents" / "images" / "easyocr_english.png").read_bytes()
    return _parse(data, "easyocr_english.png", recogniser)


def test_an_image_is_one_image_page_sized_in_pixels(poster: ParsedDocument) -> None:
    assert poster.modality is Modality.IMAGE
    assert [(p.number, p.width, p.height, p.modality) for p in poster.pages] == [
        (1, 905, 480, Modality.IMAGE)
    ]
    assert poster.text.startswith(POSTER_PHRASE)


def test_every_character_of_an_ocr_page_has_a_box_inside_the_page(poster: ParsedDocument) -> None:
    page, boxes = poster.pages[0], poster.char_boxes[0]
    assert boxes.shape == (len(poster.text), 4)
    text = poster.text
    missing = np.isnan(boxes[:, 0])
    assert all(text[i].isspace() for i in np.flatnonzero(missing))
    assert all(not text[i].isspace() for i in np.flatnonzero(~missing))
    placed = boxes[~missing]
    assert (placed[:, 0] >= 0).all() and (placed[:, 2] <= page.width).all()
    assert (placed[:, 1] >= 0).all() and (placed[:, 3] <= page.height).all()
    assert (placed[:, 0] < placed[:, 2]).all() and (placed[:, 1] < placed[:, 3]).all()


def test_a_phrase_s_character_boxes_lie_within_its_ocr_words(
    evaldata: Path, poster: ParsedDocument, recogniser: Recogniser
) -> None:
    path = evaldata / "documents" / "images" / "easyocr_english.png"
    (page_text,) = recogniser.read([lambda: Image.open(path)])
    words = [w for p in page_text.paragraphs for line in p.lines for w in line.words][:6]
    phrase = " ".join(word.text for word in words)
    assert phrase.startswith(POSTER_PHRASE)
    number, boxes = _phrase_boxes(poster, phrase)
    assert number == 1
    cursor = 0
    for word in words:
        x0, y0, x1, y1 = word.box
        for row in boxes[cursor : cursor + len(word.text)]:
            assert x0 <= row[0] < row[2] <= x1 and y0 <= row[1] < row[3] <= y1
        cursor += len(word.text) + 1
        assert cursor > len(phrase) or np.isnan(boxes[cursor - 1]).all()  # the joining space


def test_every_character_keeps_the_confidence_of_its_ocr_word(
    evaldata: Path, poster: ParsedDocument, recogniser: Recogniser
) -> None:
    path = evaldata / "documents" / "images" / "easyocr_english.png"
    (page_text,) = recogniser.read([lambda: Image.open(path)])
    (confidences,) = poster.char_confidences
    assert confidences.shape == (len(poster.text),)
    text, cursor = poster.text, 0
    for word in (w for p in page_text.paragraphs for line in p.lines for w in line.words):
        cursor = text.index(word.text, cursor)
        expected = min(100, max(0, round(word.confidence)))
        assert set(confidences[cursor : cursor + len(word.text)].tolist()) == {expected}
        cursor += len(word.text)
    joints = [i for i, char in enumerate(text) if char.isspace()]
    assert set(confidences[joints].tolist()) == {NOT_READ}


def test_a_tiff_holds_one_page_per_frame(evaldata: Path, recogniser: Recogniser) -> None:
    with Image.open(evaldata / "documents" / "images" / "easyocr_english.png") as image:
        poster = image.convert("L")
    title, advice = poster.crop((200, 20, 700, 80)), poster.crop((320, 90, 620, 150))
    buffer = io.BytesIO()
    title.save(buffer, "TIFF", save_all=True, append_images=[advice])
    document = _parse(buffer.getvalue(), "two.tiff", recogniser)
    assert [(p.number, p.width, p.height) for p in document.pages] == [(1, 500, 60), (2, 300, 60)]
    first, second = (document.text[p.span.start : p.span.end] for p in document.pages)
    assert "coronavirus" in first and "soap" in second


def test_an_image_over_the_pixel_limit_is_refused_before_it_is_read(
    evaldata: Path, recogniser: Recogniser
) -> None:
    small = Recogniser(OcrSettings(workers=1, max_image_pixels=1000))
    data = (evaldata / "documents" / "images" / "easyocr_english.png").read_bytes()
    with pytest.raises(FileTooLarge, match=r"CITEWELL_OCR__MAX_IMAGE_PIXELS"):
        _parse(data, "poster.png", small)
    small.close()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x89PNG\r\n\x1a\n" + b"\0" * 64, r"^scan\.png is a damaged image"),
        (b"\xff\xd8\xff\xe0" + b"\1" * 64, r"^scan\.png is a damaged or truncated image"),
    ],
)
def test_a_damaged_image_is_a_parse_error(
    data: bytes, message: str, recogniser: Recogniser
) -> None:
    with pytest.raises(ParseError, match=message):
        _parse(data, "scan.png", recogniser)


def test_a_truncated_image_is_a_parse_error(evaldata: Path, recogniser: Recogniser) -> None:
    data = (evaldata / "documents" / "images" / "easyocr_english.png").read_bytes()
    with pytest.raises(ParseError, match=r"^cut\.png is a damaged or truncated image"):
        _parse(data[: len(data) // 2], "cut.png", recogniser)


def test_missing_language_models_are_the_operator_s_to_install(
    tmp_path: Path, evaldata: Path
) -> None:
    missing = Recogniser(OcrSettings(workers=1, tessdata_dir=tmp_path))
    data = (evaldata / "documents" / "images" / "easyocr_english.png").read_bytes()
    with pytest.raises(ConfigError, match=r"tesseract's language models .*make install"):
        _parse(data, "poster.png", missing)
    missing.close()


# --- PDFs ----------------------------------------------------------------------------------


def test_a_scanned_page_turned_sideways_is_read_upright(
    evaldata: Path, recogniser: Recogniser
) -> None:
    """Page 2 of ocrmypdf_cardinal.pdf holds the scan turned 90 degrees."""
    data = _page_of_pdf(evaldata / "documents" / "pdf_scanned" / "ocrmypdf_cardinal.pdf", 1)
    document = _parse(data, "cardinal-2.pdf", recogniser)
    assert document.pages[0].modality is Modality.IMAGE
    assert (document.pages[0].width, document.pages[0].height) == (792, 612)
    number, boxes = _phrase_boxes(document, "The LinnSequencer")
    assert number == 1
    word = boxes[4:]  # "LinnSequencer" runs down the page: taller than wide
    assert (word[:, 3].max() - word[:, 1].min()) > 3 * (word[:, 2].max() - word[:, 0].min())


def test_a_mixed_pdf_keeps_its_text_page_and_reads_its_scanned_page(
    evaldata: Path, recogniser: Recogniser
) -> None:
    text_page = make_pdf([PageSpec([Run("A typed page about word processors.", 72, 700)])])
    merged = pypdfium2.PdfDocument(text_page)
    scan = pypdfium2.PdfDocument(evaldata / "documents" / "pdf_scanned" / "docling_ocr_test.pdf")
    merged.import_pages(scan)
    buffer = io.BytesIO()
    merged.save(buffer)
    progress: list[tuple[int, int]] = []
    document = parse(
        buffer.getvalue(),
        filename="mixed.pdf",
        limits=LIMITS,
        ocr=Ocr(recogniser, lambda done, total: progress.append((done, total))),
    )
    assert [p.modality for p in document.pages] == [Modality.TEXT, Modality.IMAGE]
    assert document.modality is Modality.MULTIMODAL
    # The text layer needs no confidence; the scanned sentence is read clearly.
    typed, scanned = (p.ocr_confidence for p in document.pages)
    assert typed is None and scanned is not None and 80 < scanned <= 100
    assert [c.size for c in document.char_confidences] == [
        0,
        document.pages[1].span.end - document.pages[1].span.start,
    ]
    first, second = (document.text[p.span.start : p.span.end] for p in document.pages)
    assert first.strip() == "A typed page about word processors."
    assert "Docling bundles PDF document conversion to JSON and Markdown" in " ".join(
        second.split()
    )
    number, boxes = _phrase_boxes(document, "Docling bundles")
    assert number == 2 and not np.isnan(boxes[0]).any()
    assert progress == [(0, 1), (1, 1)]  # only the scanned page is read with OCR


def test_without_ocr_a_scanned_page_is_an_image_page_without_text(evaldata: Path) -> None:
    data = (evaldata / "documents" / "pdf_scanned" / "docling_ocr_test.pdf").read_bytes()
    document = parse(data, filename="scan.pdf", limits=LIMITS)
    assert document.text == "" and document.pages[0].modality is Modality.IMAGE


# --- tilted scans --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def linn_top(evaldata: Path) -> Image.Image:
    """The top of the upright LinnSequencer scan (title, first paragraph, bullets): a page of
    text small enough to read quickly."""
    with Image.open(evaldata / "documents" / "images" / "ocrmypdf_linn.png") as image:
        page = image.convert("L")
    return page.crop((0, 0, page.width, page.height * 2 // 5))


@pytest.fixture(scope="module")
def poster_image(evaldata: Path) -> Image.Image:
    with Image.open(evaldata / "documents" / "images" / "easyocr_english.png") as image:
        return image.convert("L")


@pytest.fixture(scope="module")
def skewed(evaldata: Path, recogniser: Recogniser) -> ParsedDocument:
    """ocrmypdf_skew.pdf: the LinnSequencer page tilted about 1.8 degrees clockwise."""
    data = (evaldata / "documents" / "pdf_scanned" / "ocrmypdf_skew.pdf").read_bytes()
    return _parse(data, "skew.pdf", recogniser)


def test_a_tilted_scan_reads_as_well_as_an_upright_one(
    evaldata: Path, skewed: ParsedDocument
) -> None:
    """Read as given, 6.8% of its characters were wrong (1.1% on the upright page); level,
    1.1% (docs/benchmarks.md, "OCR")."""
    reference = (
        evaldata / "documents" / "pdf_scanned" / "ocrmypdf_linn.groundtruth.txt"
    ).read_text()
    assert _cer(skewed.text, reference) <= 0.02


def test_the_boxes_of_a_tilted_scan_hold_their_glyphs_on_the_page_as_displayed(
    evaldata: Path, skewed: ParsedDocument
) -> None:
    page = skewed.pages[0]
    boxes = skewed.char_boxes[0]
    placed = boxes[~np.isnan(boxes[:, 0])]
    assert (placed[:, :2] >= 0).all() and (placed[:, 2] <= page.width).all()
    assert (placed[:, 3] <= page.height).all()
    pdf = pypdfium2.PdfDocument(evaldata / "documents" / "pdf_scanned" / "ocrmypdf_skew.pdf")
    scale = OcrSettings().dpi / 72  # points to pixels of the page OCR read
    ink = np.asarray(pdf[0].render(scale=scale, grayscale=True).to_pil()) < 128
    for phrase in (LINN_FIRST_LINE, LINN_LAST_BULLET):  # far from the page's centre, at both ends
        _, rows = _phrase_boxes(skewed, phrase)
        _assert_hold_their_glyphs(ink, [b * scale for b in _word_boxes(phrase, rows)])


def test_a_page_turned_on_its_side_and_tilted_is_read_upright_then_level(
    linn_top: Image.Image, recogniser: Recogniser
) -> None:
    tilted = linn_top.rotate(-3, Image.Resampling.BICUBIC, expand=True, fillcolor=255)
    sideways = tilted.rotate(90, expand=True)
    (page,) = recogniser.read([lambda: sideways])
    assert page.turn == 270 and page.skew == pytest.approx(3, abs=0.1)
    boxes = np.array([word.box for line in _lines(page) for word in line])
    assert (boxes[:, :2] >= 0).all() and (boxes[:, 2:] <= sideways.size).all()
    line = next(
        line for line in _lines(page) if " ".join(w.text for w in line).startswith(LINN_FIRST_LINE)
    )
    ink = np.asarray(sideways) < 128
    _assert_hold_their_glyphs(ink, [word.box for word in line])


@pytest.mark.parametrize("image", ["linn_top", "poster_image"])
def test_an_upright_page_is_read_as_given(
    image: str,
    request: pytest.FixtureRequest,
    recogniser: Recogniser,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nor does a poster of large type with icons, whose tilt is the hardest to tell."""
    upright: Image.Image = request.getfixturevalue(image)
    (page,) = recogniser.read([lambda: upright])
    monkeypatch.setattr(ocr, "MIN_SKEW", math.inf)  # never turned level
    (as_given,) = recogniser.read([lambda: upright])
    assert page.skew == 0 and page == as_given


def _lines(page: PageText) -> list[tuple[Word, ...]]:
    return [line.words for paragraph in page.paragraphs for line in paragraph.lines]


def _word_boxes(phrase: str, rows: np.ndarray) -> list[np.ndarray]:
    """The box around each word's character boxes, from a phrase's rows of character boxes."""
    boxes, start = [], 0
    for word in phrase.split(" "):
        chars = rows[start : start + len(word)]
        boxes.append(np.array([*chars[:, :2].min(axis=0), *chars[:, 2:].max(axis=0)]))
        start += len(word) + 1
    return boxes


def _assert_hold_their_glyphs(ink: np.ndarray, boxes: Sequence[Box | np.ndarray]) -> None:
    """Each box holds whole every glyph (8-connected dark pixels) centred in it, to a pixel,
    and those glyphs fill at least half of it: no box cuts its glyphs or lies beside them."""
    for x0, y0, x1, y1 in boxes:
        margin = 40  # pixels around the box: a glyph cut by the box shows whole
        top, left = max(int(y0) - margin, 0), max(int(x0) - margin, 0)
        crop = ink[top : int(y1) + margin, left : int(x1) + margin]
        glyphs = []
        for ys, xs in _glyphs(crop):
            ys, xs = ys + top + 0.5, xs + left + 0.5  # pixel centres
            if x0 <= xs.mean() <= x1 and y0 <= ys.mean() <= y1:
                glyphs.append((ys, xs))
                assert x0 - 1 <= xs.min() - 0.5 and xs.max() + 0.5 <= x1 + 1
                assert y0 - 1 <= ys.min() - 0.5 and ys.max() + 0.5 <= y1 + 1
        gx0 = min(xs.min() for _, xs in glyphs) - 0.5
        gx1 = max(xs.max() for _, xs in glyphs) + 0.5
        gy0 = min(ys.min() for ys, _ in glyphs) - 0.5
        gy1 = max(ys.max() for ys, _ in glyphs) + 0.5
        assert (gx1 - gx0) * (gy1 - gy0) >= 0.5 * (x1 - x0) * (y1 - y0)


def _glyphs(ink: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Rows and columns of each 8-connected component of ``ink``: every dark pixel takes the
    least label around it until none changes."""
    height, width = ink.shape
    empty = ink.size + 1
    labels = np.where(ink, np.arange(ink.size).reshape(ink.shape), empty)
    while True:
        padded = np.pad(labels, 1, constant_values=empty)
        around = [padded[dy : dy + height, dx : dx + width] for dy in range(3) for dx in range(3)]
        spread = np.where(ink, np.min(around, axis=0), empty)
        if (spread == labels).all():
            break
        labels = spread
    for label in np.unique(labels[ink]):
        yield np.nonzero(labels == label)


def _cer(text: str, reference: str) -> float:
    """Character error rate as bench/ocr.py measures it: Levenshtein distance over code points
    after whitespace is normalised, divided by the reference's length."""
    a, b = " ".join(text.split()), " ".join(reference.split())
    codes = np.array([ord(c) for c in b])
    index = np.arange(len(b) + 1)
    previous = index.copy()
    for i, char in enumerate(a, start=1):
        row = np.empty(len(b) + 1, dtype=np.int64)
        row[0] = i
        row[1:] = np.minimum(previous[1:] + 1, previous[:-1] + (codes != ord(char)))
        previous = np.minimum.accumulate(row - index) + index
    return int(previous[-1]) / len(b)
