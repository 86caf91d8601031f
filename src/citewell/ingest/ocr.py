"""Recognising text with boxes on a page image: Debian's tesseract, through tesserocr.

tesserocr rather than pytesseract: its wheel bundles libtesseract, each worker keeps its
language models loaded from page to page (pytesseract starts a process and loads them again for
every page), and it gives words, lines and paragraphs with boxes and confidences directly; it
read a page in half pytesseract's time here (reference/infrastructure.md §4). The language
models are Debian's (``tesseract-ocr-eng``/``-spa``/``-chi-sim``, installed by the Makefile):
nothing is downloaded.

Reading one page:

1. **Orientation and script.** Tesseract's OSD says how far the page is turned (0/90/180/270)
   and which script it is written in (about 0.3 s a page at 300 dpi). A page turned with a
   confidence of at least ``MIN_TURN_CONFIDENCE`` (ocrmypdf's default threshold) is read upright.
   With ``detect_script`` the page is read with only the configured languages of its script.
2. **Tilt.** The upright page is turned level when its text lines are tilted by ``MIN_SKEW`` to
   ``MAX_SKEW`` degrees, as ocrmypdf's --deskew does: tesseract alone loses characters at the
   ends of tilted lines (on the LinnSequencer page, 7% of them at 1.8 degrees, a third or more
   from 2 degrees; docs/benchmarks.md, "OCR"). The angle is found as Leptonica finds it
   (``_skew``), in about 0.05 s a page. A page tilted less is read as given.
3. **Words** come in tesseract's reading order (blocks, paragraphs, lines), each with its box and
   confidence; blank words and words under ``min_confidence`` are left out. When automatic
   layout finds no word at all (a photo of a sign), the page is read again as sparse text.
4. **Boxes** are in pixels of the image as given, origin top-left. A character's box is its
   word's box cut into equal slices along the line (in the level page, then turned back), so
   it always lies inside the word's box. A box on a page turned level is a tilted rectangle
   on the page as given: it becomes the box around that rectangle's corners, which still holds
   every pixel of its glyphs but is taller than they are by up to its width times the sine of
   the tilt. Then it is turned back by the page's quarter turns.

``Recogniser`` is the bounded worker pool: at most ``OcrSettings.workers`` pages are read at
once in the process, whoever asks; each worker thread has its own tesseract (tesserocr releases
the GIL while it reads).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image
from tesserocr import PSM, RIL, PyTessBaseAPI  # type: ignore[import-untyped]  # ships no py.typed

from citewell.config import OcrSettings
from citewell.errors import ConfigError

__all__ = [
    "BLANK_LIGHTEST_INK",
    "Box",
    "Line",
    "Ocr",
    "PageText",
    "Paragraph",
    "Progress",
    "Recogniser",
    "Word",
    "is_blank",
]

MIN_TURN_CONFIDENCE = 14.0
"""Least OSD confidence for turning a page upright (ocrmypdf's --rotate-pages-threshold)."""

BLANK_LIGHTEST_INK = 160
"""A page whose darkest pixel is lighter than this (0 black, 255 white) has nothing to read: it is
not given to tesseract (an upload of blank pages must not buy minutes of OCR)."""

MIN_SKEW = 0.3
"""Least tilt, in degrees, a page is turned level for: a page tilted less is read as given."""
MAX_SKEW = 10.0
"""Most tilt, in degrees, looked for: a scan is rarely tilted more (Leptonica, which ocrmypdf's
--deskew uses, looks within 7)."""
MIN_SKEW_CONFIDENCE = 3.0
"""Least ratio of the best angle's score to the worst one's for turning a page level
(Leptonica's ``MIN_ALLOWED_CONFIDENCE``)."""
_SKEW_WIDTH = 600
"""Width in pixels, or more, that a page is shrunk to for finding its tilt: 75 dpi for a letter
page at 300 dpi, as Leptonica's sweep. Enough to tell a tenth of a degree (1/600 radian)."""

# The script tesseract's OSD names for each language we know; other languages are always used.
_SCRIPTS: dict[str, str] = {
    "eng": "Latin",
    "spa": "Latin",
    "fra": "Latin",
    "deu": "Latin",
    "ita": "Latin",
    "por": "Latin",
    "chi_sim": "Han",
    "chi_tra": "Han",
}

Box = tuple[float, float, float, float]
"""x0, y0, x1, y1 in pixels of the page image, origin top-left."""

Progress = Callable[[int, int], None]
"""Told ``(pages_done, pages_total)`` before the first page and after each page read."""

PageImage = Callable[[], Image.Image]
"""Makes a page's image when a worker is ready for it, so that only pages being read are held."""


@dataclass(frozen=True, slots=True)
class Word:
    text: str
    box: Box
    char_boxes: tuple[Box, ...]
    """One box per code point of ``text``, each inside ``box``."""
    confidence: float
    """Tesseract's confidence in the word, 0-100."""


@dataclass(frozen=True, slots=True)
class Line:
    words: tuple[Word, ...]


@dataclass(frozen=True, slots=True)
class Paragraph:
    lines: tuple[Line, ...]


@dataclass(frozen=True, slots=True)
class PageText:
    """What OCR read on one page image."""

    width: int
    height: int
    """Size of the image in pixels; every box lies within it."""
    paragraphs: tuple[Paragraph, ...]
    turn: int
    """Degrees (counter-clockwise) the image was turned to be read upright: 0, 90, 180, 270."""
    skew: float
    """Degrees (counter-clockwise) the upright image was then turned to be read level; 0 when
    it was read as it stood."""
    languages: str

    @property
    def confidence(self) -> float | None:
        """The words' mean confidence weighted by their length; None when nothing was read."""
        words = [w for p in self.paragraphs for line in p.lines for w in line.words]
        total = sum(len(w.text) for w in words)
        return sum(w.confidence * len(w.text) for w in words) / total if total else None


class Recogniser:
    """The bounded pool of tesseract workers of one process (see the module docs)."""

    def __init__(self, settings: OcrSettings) -> None:
        self.settings = settings
        self._pool = ThreadPoolExecutor(max_workers=settings.workers, thread_name_prefix="ocr")
        self._local = threading.local()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def read(self, pages: Sequence[PageImage], progress: Progress | None = None) -> list[PageText]:
        """Read the pages, in their order. The first page to fail, in that order, cancels the
        pages not yet begun and is raised once the pages begun are done (they may use what the
        caller frees then); ``CancelledError`` when the recogniser closes meanwhile.

        Raises ``ConfigError`` when a configured language model is missing. No pages: no
        progress reported, and tesseract need not be installed.
        """
        if not pages:
            return []
        self._check_models()
        futures = [self._pool.submit(self._read_page, page) for page in pages]
        try:
            _report(futures, progress)
            return [future.result() for future in futures]
        finally:
            for future in futures:
                future.cancel()
            _settle(futures)

    def _check_models(self) -> None:
        folder = self.settings.tessdata_dir
        names = [*self.settings.languages.split("+"), "osd"]
        missing = [name for name in names if not (folder / f"{name}.traineddata").is_file()]
        if missing:
            raise ConfigError(
                f"OCR needs tesseract's language models {', '.join(missing)} in {folder}: "
                "install Debian's tesseract-ocr packages (`make install` does) or set "
                "CITEWELL_OCR__TESSDATA_DIR / CITEWELL_OCR__LANGUAGES"
            )

    def _read_page(self, page: PageImage) -> PageText:
        image = _grey(page())
        if is_blank(image):
            return PageText(image.width, image.height, (), 0, 0.0, self.settings.languages)
        turn, script = self._orientation(image)
        upright = image.rotate(turn, expand=True) if turn else image
        level, skew = _level(upright)
        languages = self._languages(script)
        api = self._api(languages)
        paragraphs = _recognise(api, level, PSM.AUTO, self.settings.min_confidence)
        if not paragraphs:
            paragraphs = _recognise(api, level, PSM.SPARSE_TEXT, self.settings.min_confidence)

        def place(box: Box) -> Box:
            unskewed = _unskew(box, skew, upright.size, level.size)
            return _unturn(unskewed, turn, image.width, image.height)

        return PageText(image.width, image.height, _place(paragraphs, place), turn, skew, languages)

    def _orientation(self, image: Image.Image) -> tuple[int, str | None]:
        api = self._api("osd", PSM.OSD_ONLY)
        api.SetImage(image)
        found: dict[str, Any] | None = api.DetectOrientationScript()
        if not found:
            return 0, None  # too little text to tell
        turn = int(found["orient_deg"]) if found["orient_conf"] >= MIN_TURN_CONFIDENCE else 0
        return turn % 360, str(found["script_name"])

    def _languages(self, script: str | None) -> str:
        configured = self.settings.languages.split("+")
        if not self.settings.detect_script or script is None:
            return self.settings.languages
        chosen = [name for name in configured if _SCRIPTS.get(name, script) == script]
        return "+".join(chosen) if chosen else self.settings.languages

    def _api(self, languages: str, mode: PSM = PSM.AUTO) -> PyTessBaseAPI:
        """This worker thread's tesseract for ``languages``, loaded on first use."""
        apis: dict[str, PyTessBaseAPI] = self._local.__dict__.setdefault("apis", {})
        api = apis.get(languages)
        if api is None:
            api = PyTessBaseAPI(path=f"{self.settings.tessdata_dir}/", lang=languages, psm=mode)
            apis[languages] = api
        return api


@dataclass(frozen=True, slots=True)
class Ocr:
    """OCR for one document: the process's recogniser, and who hears of its progress."""

    recogniser: Recogniser
    progress: Progress | None = None

    @property
    def settings(self) -> OcrSettings:
        return self.recogniser.settings

    def read(self, pages: Sequence[PageImage]) -> list[PageText]:
        return self.recogniser.read(pages, self.progress)


# Pages are waited for one by one (``result()``), never with ``as_completed`` or ``wait``: a page
# cancelled by the pool's shutdown (``Recogniser.close``) wakes the first, but would leave the
# others waiting for ever, as only a pool that runs a page notifies their waiters.
def _report(futures: Sequence[Future[PageText]], progress: Progress | None) -> None:
    """Wait for every page in order, telling ``progress``; raises the first failure met."""
    total = len(futures)
    if progress is not None:
        progress(0, total)
    for done, future in enumerate(futures, start=1):
        future.result()
        if progress is not None:
            progress(done, total)


def _settle(futures: Sequence[Future[PageText]]) -> None:
    """Wait until every page is read, failed or cancelled."""
    for future in futures:
        with suppress(CancelledError):
            future.exception()


def is_blank(image: Image.Image) -> bool:
    """Whether a page image has no ink at all (``BLANK_LIGHTEST_INK``)."""
    darkest, _ = _grey(image).getextrema()  # a grey image has one band: (least, most)
    return bool(int(darkest) >= BLANK_LIGHTEST_INK)  # type: ignore[arg-type]


def _grey(image: Image.Image) -> Image.Image:
    """8-bit grey, transparent parts white: what tesseract binarises best, at a third the size."""
    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(background, rgba)
    return image if image.mode == "L" else image.convert("L")


def _level(image: Image.Image) -> tuple[Image.Image, float]:
    """``image`` turned level, and the degrees it was turned counter-clockwise (0: as given)."""
    skew = _skew(image)
    if not skew:
        return image, 0.0
    # Grown to hold the turned corners, padded white: no ink is cut off, none is added.
    return image.rotate(skew, Image.Resampling.BICUBIC, expand=True, fillcolor=255), skew


def _skew(image: Image.Image) -> float:
    """Degrees counter-clockwise that turn the text lines of ``image`` level; 0 when they are
    level within ``MIN_SKEW``, or no tilt stands out.

    Leptonica's method, which ocrmypdf's --deskew uses: the ink is sheared by each angle in
    turn, and the lines are level where the ink's row counts change most sharply from row to
    row (text lines and the gaps between them line up). A sweep over ±``MAX_SKEW`` in half
    degrees, then twentieths around the best.
    """
    ys, xs = _ink(image)
    if not ys.size:
        return 0.0
    sweep = np.arange(-MAX_SKEW, MAX_SKEW + 0.5, 0.5)
    scores = [_sharpness(ys, xs, angle) for angle in sweep]
    best = sweep[int(np.argmax(scores))]
    if not max(scores) > MIN_SKEW_CONFIDENCE * min(scores):
        return 0.0  # no angle stands out: a photo, or a page still on its side
    fine = best + np.linspace(-0.5, 0.5, 21)
    angle = float(fine[int(np.argmax([_sharpness(ys, xs, a) for a in fine]))])
    return angle if abs(angle) >= MIN_SKEW else 0.0


def _ink(image: Image.Image) -> tuple[np.ndarray, np.ndarray]:
    """Row and column of each dark pixel of ``image`` shrunk to ``_SKEW_WIDTH`` (a pixel is
    dark if any pixel it stands for is, so thin strokes stay)."""
    dark = np.asarray(image) < 128
    f = max(1, image.width // _SKEW_WIDTH)
    rows, columns = dark.shape[0] // f, dark.shape[1] // f
    blocks = dark[: rows * f, : columns * f].reshape(rows, f, columns, f)
    ys, xs = np.nonzero(blocks.any(axis=(1, 3)))
    return ys.astype(np.float64), xs.astype(np.float64)


def _sharpness(ys: np.ndarray, xs: np.ndarray, angle: float) -> float:
    """How sharply the row counts of the ink change once it is sheared by ``angle`` degrees:
    the sum of squared differences of neighbouring rows (Leptonica's differential square sum,
    which ignores how much ink there is)."""
    rows = np.rint(ys - xs * math.tan(math.radians(angle))).astype(np.int64)
    counts = np.bincount(rows - rows.min()).astype(np.float64)
    return float(np.sum(np.diff(counts) ** 2))


def _recognise(
    api: PyTessBaseAPI, image: Image.Image, mode: PSM, min_confidence: float
) -> tuple[Paragraph, ...]:
    api.SetPageSegMode(mode)
    api.SetImage(image)
    api.Recognize()
    paragraphs: list[list[list[Word]]] = []
    for word, new_paragraph, new_line in _words(api):
        if not word.text or word.confidence < min_confidence:
            continue
        if new_paragraph or not paragraphs:
            paragraphs.append([])
        if new_line or not paragraphs[-1]:
            paragraphs[-1].append([])
        paragraphs[-1][-1].append(word)
    return tuple(
        Paragraph(tuple(Line(tuple(words)) for words in lines if words))
        for lines in paragraphs
        if lines
    )


def _words(api: PyTessBaseAPI) -> Iterator[tuple[Word, bool, bool]]:
    """Each word with whether it begins a paragraph, and whether it begins a line.

    Beginnings are reported for every word, also one that will be left out: the next kept word
    then starts the paragraph or line instead (see ``_recognise``).
    """
    iterator = api.GetIterator()
    if iterator is None:
        return
    new_paragraph = new_line = False
    while True:
        new_paragraph = new_paragraph or iterator.IsAtBeginningOf(RIL.PARA)
        new_line = new_line or iterator.IsAtBeginningOf(RIL.TEXTLINE)
        empty = iterator.Empty(RIL.WORD)  # reading an empty word's text raises
        text = "" if empty else (iterator.GetUTF8Text(RIL.WORD) or "").strip()
        bounds = iterator.BoundingBox(RIL.WORD)
        if text and bounds is not None:
            x0, y0, x1, y1 = bounds
            box = (float(x0), float(y0), float(x1), float(y1))
            confidence = float(iterator.Confidence(RIL.WORD))
            yield Word(text, box, _slices(box, len(text)), confidence), new_paragraph, new_line
            new_paragraph = new_line = False
        if not iterator.Next(RIL.WORD):
            return


def _slices(box: Box, count: int) -> tuple[Box, ...]:
    """``box`` cut into ``count`` equal slices, left to right."""
    x0, y0, x1, y1 = box
    step = (x1 - x0) / count
    return tuple((x0 + i * step, y0, x0 + (i + 1) * step, y1) for i in range(count))


def _place(paragraphs: tuple[Paragraph, ...], place: Callable[[Box], Box]) -> tuple[Paragraph, ...]:
    """The words with every box moved by ``place``."""
    return tuple(
        Paragraph(
            tuple(
                Line(
                    tuple(
                        Word(
                            word.text,
                            place(word.box),
                            tuple(place(box) for box in word.char_boxes),
                            word.confidence,
                        )
                        for word in line.words
                    )
                )
                for line in paragraph.lines
            )
        )
        for paragraph in paragraphs
    )


def _unskew(box: Box, skew: float, size: tuple[int, int], level_size: tuple[int, int]) -> Box:
    """A box on the image turned ``skew`` degrees counter-clockwise (PIL's ``rotate``, with
    ``expand``, to ``level_size``), as the box around it on the image of ``size``.

    The box turned back is a tilted rectangle: the box around its corners still holds every
    pixel of the glyphs it held. It is clipped to the image, whose turned corners the level
    image pads with white.
    """
    if not skew:
        return box
    (width, height), (level_width, level_height) = size, level_size
    cos, sin = math.cos(math.radians(skew)), math.sin(math.radians(skew))
    x0, y0, x1, y1 = box
    corners = [(x - level_width / 2, y - level_height / 2) for x in (x0, x1) for y in (y0, y1)]
    xs = [width / 2 + cos * dx - sin * dy for dx, dy in corners]
    ys = [height / 2 + sin * dx + cos * dy for dx, dy in corners]
    return (
        min(max(min(xs), 0.0), width),
        min(max(min(ys), 0.0), height),
        min(max(max(xs), 0.0), width),
        min(max(max(ys), 0.0), height),
    )


def _unturn(box: Box, turn: int, width: int, height: int) -> Box:
    """A box on the image turned ``turn`` degrees counter-clockwise (PIL's ``rotate``, with
    ``expand``), on the original ``width`` x ``height`` image."""
    u0, v0, u1, v1 = box
    if turn == 90:
        return (width - v1, u0, width - v0, u1)
    if turn == 180:
        return (width - u1, height - v1, width - u0, height - v0)
    if turn == 270:
        return (v0, height - u1, v1, height - u0)
    return box
