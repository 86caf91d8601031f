"""PDF read with pypdfium2: every character of the text layer with its box, page by page.

This module only *reads*: it turns each page into a ``PageGlyphs`` (characters in PDFium's
order with their boxes, font sizes and baselines); ``pdf_layout`` groups them into lines,
paragraphs and headings. Choices that matter for citations:

- Text comes from PDFium's text page, one entry per character index. PDFium's generated line
  ends (``\\r\\n``) become a single ``\\n`` without a box; a line-end hyphen (which PDFium reports
  as U+0002/U+FFFE and follows by no line break) is kept as ``-`` and followed by ``\\n``.
  Spaces PDFium generates between words are kept, without a box. No text is invented or dropped.
- A character's box is exactly PDFium's ``get_charbox`` (tight glyph box), moved to top-left
  origin relative to the page's crop box (``pdf_layout.rotate_boxes`` then turns it into the
  coordinates of the page as displayed, i.e. after its /Rotate).
- Font size is the size PDFium reports times the vertical scale of the character's matrix (many
  producers set 1 pt fonts in a scaled matrix); bold or italic comes from the font's name,
  weight and flags.
- PDFium is not thread-safe: a lock serialises all use of it in this process.
- With ``ocr``, every page without a text layer (``pdf_layout.has_text_layer``) that is not
  blank (drawn at ``BLANK_DPI`` first) is rendered as displayed, in grey at ``OcrSettings.dpi``
  (lower when the page would be over ``max_image_pixels``), and read by OCR: pages are rendered
  by the OCR workers one at a time, so a long scan is never held in memory whole. A file with
  more such pages than ``IngestSettings.max_ocr_pages`` is refused before OCR starts.
"""

from __future__ import annotations

import ctypes
import math
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pypdfium2
import pypdfium2.raw as pdfium_c
from PIL import Image

from citewell.config import IngestSettings, OcrSettings
from citewell.errors import ParseError
from citewell.ingest.base import ParsedDocument
from citewell.ingest.limits import check_limit
from citewell.ingest.ocr import Ocr, PageText, is_blank
from citewell.ingest.pdf_layout import PageGlyphs, has_text_layer, layout_document
from citewell.ingest.pdf_tables import find_tables

__all__ = ["PARSER", "PDFIUM_LOCK", "PdfParser", "read_page"]

PDFIUM_LOCK = threading.Lock()
"""PDFium is not thread-safe: every use of it in the process (parsing, drawing pages) holds this."""

_FPDF_ERR_PASSWORD = 4
_LINE_END_HYPHENS = frozenset({"\x02", "\ufffe"})
_FLAG_ITALIC = 1 << 6
_FLAG_FORCE_BOLD = 1 << 18
_BOLD_NAME = re.compile(r"bold|black|heavy|semibold|demi", re.IGNORECASE)
_ITALIC_NAME = re.compile(r"italic|oblique", re.IGNORECASE)
_NAN_BOX = (math.nan, math.nan, math.nan, math.nan)

Handle = Any  # ctypes handles from pypdfium2.raw carry no useful static type


@dataclass(frozen=True, slots=True)
class _Font:
    size: float
    emphasis: bool


def _open(data: bytes, filename: str) -> Any:
    try:
        return pypdfium2.PdfDocument(data)
    except pypdfium2.PdfiumError as exc:
        if exc.err_code == _FPDF_ERR_PASSWORD:
            raise ParseError(
                f"{filename} is encrypted: remove its password and upload it again",
                filename=filename,
            ) from None
        if b"%%EOF" not in data[-2048:]:
            raise ParseError(
                f"{filename} is truncated: the end of the PDF is missing", filename=filename
            ) from None
        raise ParseError(f"{filename} is a damaged PDF ({exc})", filename=filename) from None


def _char_codes(textpage: Any, count: int) -> str:
    """One character per PDFium character index.

    ``get_text_range`` is fast but may insert or drop characters (and it decodes UTF-16, so a
    character outside the BMP counts once, not twice); when its length is off, ask PDFium for
    each character's code point so text and boxes stay aligned one to one.
    """
    text: str = textpage.get_text_range()
    if len(text) == count:
        return text
    return "".join(_code_point(pdfium_c.FPDFText_GetUnicode(textpage, i)) for i in range(count))


def _code_point(code: int) -> str:
    # Lone surrogates cannot be stored as UTF-8; 0 means PDFium found no Unicode for the glyph.
    if code == 0 or 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
        return "\ufffd"
    return chr(code)


class _FontCache:
    """Font size and emphasis per text object: all characters of one object share them."""

    def __init__(self, textpage: Any) -> None:
        self._textpage = textpage
        self._fonts: dict[int | None, _Font] = {}
        self._matrix = pdfium_c.FS_MATRIX()

    def font(self, index: int) -> _Font:
        handle = pdfium_c.FPDFText_GetTextObject(self._textpage, index)
        key = ctypes.cast(handle, ctypes.c_void_p).value
        font = self._fonts.get(key) if key else None
        if font is None:
            font = _Font(self._size(index), self._emphasis(handle))
            if key:
                self._fonts[key] = font
        return font

    def _size(self, index: int) -> float:
        size = float(pdfium_c.FPDFText_GetFontSize(self._textpage, index))
        if pdfium_c.FPDFText_GetMatrix(self._textpage, index, self._matrix):
            size *= math.hypot(self._matrix.c, self._matrix.d)
        return size

    def _emphasis(self, text_object: Handle) -> bool:
        if not text_object:
            return False
        font = pdfium_c.FPDFTextObj_GetFont(text_object)
        if not font:
            return False
        length = pdfium_c.FPDFFont_GetBaseFontName(font, None, 0)
        buffer = ctypes.create_string_buffer(length) if length else None
        if buffer is not None:
            pdfium_c.FPDFFont_GetBaseFontName(font, buffer, length)
        name = buffer.value.decode("latin-1") if buffer is not None else ""
        flags = pdfium_c.FPDFFont_GetFlags(font)
        angle = ctypes.c_int(0)
        slanted = bool(pdfium_c.FPDFFont_GetItalicAngle(font, angle)) and angle.value != 0
        bold = (
            pdfium_c.FPDFFont_GetWeight(font) >= 600
            or (flags > 0 and flags & _FLAG_FORCE_BOLD)
            or _BOLD_NAME.search(name) is not None
        )
        italic = (
            slanted or (flags > 0 and flags & _FLAG_ITALIC) or _ITALIC_NAME.search(name) is not None
        )
        return bool(bold or italic)


class _GlyphsBuilder:
    """Collects a page's characters with their boxes (top-left origin) and font facts."""

    def __init__(self) -> None:
        self.chars: list[str] = []
        self.boxes: list[tuple[float, float, float, float]] = []
        self.sizes: list[float] = []
        self.baselines: list[float] = []
        self.emphasis: list[bool] = []

    def add(
        self,
        char: str,
        box: tuple[float, float, float, float] = _NAN_BOX,
        size: float = math.nan,
        baseline: float = math.nan,
        emphasis: bool = False,
    ) -> None:
        self.chars.append(char)
        self.boxes.append(box)
        self.sizes.append(size)
        self.baselines.append(baseline)
        self.emphasis.append(emphasis)


class _CharReader:
    """Reads one character's box and baseline through PDFium, reusing its output buffers."""

    def __init__(self, textpage: Any, bbox: tuple[float, float, float, float]) -> None:
        self._textpage = textpage
        self._left, self._top = bbox[0], bbox[3]
        self._l, self._r, self._b, self._t = (ctypes.c_double() for _ in range(4))
        self._x, self._y = ctypes.c_double(), ctypes.c_double()

    def box(self, index: int) -> tuple[float, float, float, float]:
        """The tight glyph box of ``get_charbox``, flipped to a top-left origin; NaN if none."""
        if not pdfium_c.FPDFText_GetCharBox(
            self._textpage, index, self._l, self._r, self._b, self._t
        ):
            return _NAN_BOX
        left, top = self._left, self._top
        return (
            self._l.value - left,
            top - self._t.value,
            self._r.value - left,
            top - self._b.value,
        )

    def baseline(self, index: int) -> float:
        pdfium_c.FPDFText_GetCharOrigin(self._textpage, index, self._x, self._y)
        return self._top - self._y.value


def _read_chars(textpage: Any, bbox: tuple[float, float, float, float]) -> _GlyphsBuilder:
    count = textpage.count_chars()
    codes = _char_codes(textpage, count)
    fonts = _FontCache(textpage)
    reader = _CharReader(textpage, bbox)
    out = _GlyphsBuilder()
    for index, char in enumerate(codes):
        following = codes[index + 1] if index + 1 < count else "\n"
        if char == "\r":
            if following != "\n":
                out.add("\n")  # a lone CR still ends a line
            continue
        if char == "\n" or pdfium_c.FPDFText_IsGenerated(textpage, index):
            out.add(char)  # PDFium's line ends and word spaces have no glyph of their own
            continue
        font = fonts.font(index)
        hyphen = char in _LINE_END_HYPHENS
        text = "-" if hyphen else _control_free(char)
        out.add(text, reader.box(index), font.size, reader.baseline(index), font.emphasis)
        if hyphen and following not in "\r\n":
            out.add("\n")  # PDFium joins the lines after such a hyphen; keep them apart
    return out


def _control_free(char: str) -> str:
    """Control characters other than tab would corrupt the text; mark them as unknown."""
    return "\ufffd" if char < " " and char != "\t" else char


def _has_images(page: Any) -> bool:
    images = page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,))
    return next(iter(images), None) is not None


def read_page(document: Any, index: int, filename: str) -> PageGlyphs:
    """Everything ``pdf_layout`` needs from page ``index`` (0-based) of an open document."""
    try:
        page = document[index]
    except pypdfium2.PdfiumError:
        raise ParseError(f"{filename}: page {index + 1} is damaged", filename=filename) from None
    try:
        width, height = page.get_size()
        bbox = page.get_bbox()
        textpage = page.get_textpage()
        try:
            chars = _read_chars(textpage, bbox)
        finally:
            textpage.close()
        return PageGlyphs(
            number=index + 1,
            label=document.get_page_label(index) or None,
            width=float(width),
            height=float(height),
            rotation=int(page.get_rotation()),
            has_images=_has_images(page),
            text="".join(chars.chars),
            boxes=np.asarray(chars.boxes, dtype=np.float32).reshape(-1, 4),
            sizes=np.asarray(chars.sizes, dtype=np.float32),
            baselines=np.asarray(chars.baselines, dtype=np.float32),
            emphasis=np.asarray(chars.emphasis, dtype=np.bool_),
            tables=find_tables(page, bbox),
        )
    finally:
        page.close()


_JUNK_TITLE = re.compile(r"^(microsoft (word|powerpoint) - |untitled)|\.\w{2,4}$", re.IGNORECASE)


def _metadata_title(document: Any) -> str | None:
    """The Title of the document information, unless it is a file name or a placeholder."""
    title = " ".join(str(document.get_metadata_value("Title") or "").split())
    return title if title and not _JUNK_TITLE.search(title) else None


def _render(document: Any, index: int, settings: OcrSettings) -> Image.Image:
    """Page ``index`` (0-based) as displayed, in grey, for OCR."""
    with PDFIUM_LOCK:
        page = document[index]
        try:
            width, height = page.get_size()
            fit = math.sqrt(settings.max_image_pixels / max(width * height, 1.0))
            bitmap = page.render(scale=min(settings.dpi / 72, fit), grayscale=True)
            try:
                image: Image.Image = bitmap.to_pil().copy()  # to_pil shares the bitmap's buffer
                return image
            finally:
                bitmap.close()
        finally:
            page.close()


BLANK_DPI = 48
"""Resolution a page without a text layer is first drawn at, to tell a blank one without OCR:
a few milliseconds a page, where OCR takes seconds."""


def _is_blank(document: Any, index: int) -> bool:
    """Whether page ``index`` (0-based), as displayed, shows no ink (``ocr.is_blank``)."""
    with PDFIUM_LOCK:
        page = document[index]
        try:
            bitmap = page.render(scale=BLANK_DPI / 72, grayscale=True)
            try:
                return is_blank(bitmap.to_pil())
            finally:
                bitmap.close()
        finally:
            page.close()


def _read_scans(
    document: Any, pages: Sequence[PageGlyphs], ocr: Ocr, limits: IngestSettings, filename: str
) -> dict[int, PageText]:
    """What OCR reads on each page without a text layer that is not blank, by page number.

    Raises ``FileTooLarge`` when there are more such pages than ``limits.max_ocr_pages``."""
    numbers = [
        page.number
        for page in pages
        if not has_text_layer(page) and not _is_blank(document, page.number - 1)
    ]
    check_limit(
        len(numbers),
        limits.max_ocr_pages,
        what="pages to read with OCR",
        setting="max_ocr_pages",
        filename=filename,
    )
    images = [partial(_render, document, number - 1, ocr.settings) for number in numbers]
    return dict(zip(numbers, ocr.read(images), strict=True))


class PdfParser:
    media_types: tuple[str, ...] = ("application/pdf",)

    def parse(
        self, data: bytes, *, filename: str, limits: IngestSettings, ocr: Ocr | None = None
    ) -> ParsedDocument:
        with PDFIUM_LOCK:
            document = _open(data, filename)
        try:
            with PDFIUM_LOCK:
                count = len(document)
                check_limit(
                    count, limits.max_pages, what="pages", setting="max_pages", filename=filename
                )
                pages = [read_page(document, index, filename) for index in range(count)]
                title = _metadata_title(document)
            scans = {} if ocr is None else _read_scans(document, pages, ocr, limits, filename)
        finally:
            with PDFIUM_LOCK:
                document.close()
        return layout_document(pages, title=title, scans=scans)


PARSER = PdfParser()
