"""Pictures of pages: a page drawn at a given width, with the boxes of a cited range tinted on it.

    image = page_image(original, mime_type, page, width=800)                     # the page
    image = page_image(original, mime_type, page, width=800, boxes=boxes)        # highlighted
    image = page_image(original, mime_type, page, width=800, boxes=boxes, crop=True)
    data = encode(image, ImageFormat.WEBP)

Pages are drawn in the frame the character boxes use (``citewell.model``: top-left origin, y
down). A PDF page is drawn by PDFium as displayed (its crop box, after its /Rotate), one page
coordinate being one point. An image source's page is the image itself (a frame of a
multi-page TIFF) as its pixels are stored, which OCR read (``ingest.image``): page coordinates
are its pixels. Other sources have no pages to draw (``UnsupportedFormat``).

The picture is ``width`` pixels wide and as tall as the drawn area's proportions make it; an
area taller than ``MAX_HEIGHT`` allows is drawn narrower. With ``crop`` only the boxes' union
and a margin around it are drawn. A box tints exactly the pixels it touches, with a
translucent yellow: one that overlaps another tints no darker.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import pypdfium2
import pypdfium2.raw as pdfium_c
from PIL import Image, ImageDraw

from citewell.errors import UnsupportedFormat

# PDFium is not thread-safe: drawing must take the lock the PDF parser holds.
from citewell.ingest.pdf import PDFIUM_LOCK
from citewell.model import Box, Page

__all__ = [
    "CROP_MARGIN",
    "MAX_HEIGHT",
    "MAX_WIDTH",
    "MIN_WIDTH",
    "TINT",
    "ImageFormat",
    "encode",
    "page_image",
]

MIN_WIDTH = 64
MAX_WIDTH = 2000
MAX_HEIGHT = 4000
TINT = (255, 200, 0, 96)
"""The highlight colour, RGBA: a marker's yellow at about 40% opacity."""
CROP_MARGIN = 0.04
"""Margin around the boxes of a cropped picture, as a fraction of the page's width."""

_PDF = "application/pdf"
_WHITE = (255, 255, 255, 255)


class ImageFormat(StrEnum):
    PNG = "png"
    WEBP = "webp"

    @property
    def media_type(self) -> str:
        return f"image/{self.value}"


def page_image(
    original: bytes,
    mime_type: str,
    page: Page,
    *,
    width: int,
    boxes: Sequence[Box] = (),
    crop: bool = False,
) -> Image.Image:
    """Page ``page`` of a source (``original``, of type ``mime_type``) as an RGB picture
    ``width`` pixels wide, with ``boxes`` (in page coordinates) tinted; with ``crop``, only the
    part around the boxes."""
    if not MIN_WIDTH <= width <= MAX_WIDTH:
        raise ValueError(f"width {width} is outside {MIN_WIDTH}..{MAX_WIDTH}")
    frame = _Frame.of(_around(boxes, page) if crop and boxes else _whole(page), width)
    if mime_type == _PDF:
        image = _pdf_page(original, page, frame)
    elif mime_type.startswith("image/"):
        image = _raster_page(original, page, frame)
    else:
        raise UnsupportedFormat(f"pages of {mime_type} files cannot be drawn")
    return _tinted(image, boxes, frame) if boxes else image


def encode(image: Image.Image, image_format: ImageFormat) -> bytes:
    out = io.BytesIO()
    if image_format is ImageFormat.WEBP:
        image.save(out, "WEBP", quality=85)
    else:
        image.save(out, "PNG")
    return out.getvalue()


@dataclass(frozen=True, slots=True)
class _Frame:
    """Where the picture lies on the page laid out at ``scale`` pixels per page unit: its top
    left corner is pixel ``(left, top)`` of the laid-out page (whole pixels, so that the page,
    whatever draws it, and the boxes meet exactly)."""

    scale: float
    left: int
    top: int
    size: tuple[int, int]

    @classmethod
    def of(cls, area: Box, width: int) -> _Frame:
        scale = min(width / (area.x1 - area.x0), MAX_HEIGHT / (area.y1 - area.y0))
        left, top = round(area.x0 * scale), round(area.y0 * scale)
        right, bottom = round(area.x1 * scale), round(area.y1 * scale)
        return cls(scale, left, top, (max(1, right - left), max(1, bottom - top)))

    def pixel(self, x: float, y: float) -> tuple[float, float]:
        """Page coordinates as a position on the picture, in pixels."""
        return x * self.scale - self.left, y * self.scale - self.top


def _whole(page: Page) -> Box:
    return Box(x0=0, y0=0, x1=page.width, y1=page.height)


def _around(boxes: Sequence[Box], page: Page) -> Box:
    margin = CROP_MARGIN * page.width
    return Box(
        x0=max(0.0, min(b.x0 for b in boxes) - margin),
        y0=max(0.0, min(b.y0 for b in boxes) - margin),
        x1=min(page.width, max(b.x1 for b in boxes) + margin),
        y1=min(page.height, max(b.y1 for b in boxes) + margin),
    )


def _pdf_page(original: bytes, page: Page, frame: _Frame) -> Image.Image:
    with PDFIUM_LOCK:
        document = pypdfium2.PdfDocument(original)
        try:
            pdf_page = document[page.number - 1]
            try:
                return _rendered(pdf_page, page, frame)
            finally:
                pdf_page.close()
        finally:
            document.close()


def _rendered(pdf_page: Any, page: Page, frame: _Frame) -> Image.Image:
    # The whole page is laid out and shifted so that the frame's corner falls on the bitmap's
    # origin: PDFium draws only into the bitmap, so its size is ours to the pixel.
    bitmap = pypdfium2.PdfBitmap.new_native(*frame.size, pdfium_c.FPDFBitmap_BGR)
    try:
        bitmap.fill_rect(_WHITE, 0, 0, *frame.size)
        pdfium_c.FPDF_RenderPageBitmap(
            bitmap,
            pdf_page,
            -frame.left,
            -frame.top,
            round(page.width * frame.scale),
            round(page.height * frame.scale),
            0,  # no rotation beyond the page's own /Rotate, which PDFium applies
            pdfium_c.FPDF_ANNOT,
        )
        image: Image.Image = bitmap.to_pil()  # a copy: PIL turns PDFium's BGR into RGB
        return image
    finally:
        bitmap.close()


def _raster_page(original: bytes, page: Page, frame: _Frame) -> Image.Image:
    with Image.open(io.BytesIO(original)) as opened:
        opened.seek(page.number - 1)  # a frame of a multi-page TIFF
        pixels = opened.convert("RGB")
    # Source pixels per picture pixel: the image's own pixels per page unit, over the scale.
    ratio = pixels.width / page.width / frame.scale
    left, top = frame.left * ratio, frame.top * ratio
    width, height = frame.size
    return pixels.resize(
        frame.size,
        Image.Resampling.LANCZOS,
        box=(left, top, left + width * ratio, top + height * ratio),
    )


def _tinted(image: Image.Image, boxes: Sequence[Box], frame: _Frame) -> Image.Image:
    overlay = Image.new("RGBA", image.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    for box in boxes:
        x0, y0 = frame.pixel(box.x0, box.y0)
        x1, y1 = frame.pixel(box.x1, box.y1)
        # Pixel x covers [x, x + 1): these are the pixels the box touches (bounds inclusive).
        left, top, right, bottom = (
            math.floor(x0),
            math.floor(y0),
            math.ceil(x1) - 1,
            math.ceil(y1) - 1,
        )
        if right >= left and bottom >= top:
            draw.rectangle((left, top, right, bottom), fill=TINT)
    return Image.alpha_composite(image.convert("RGBA"), overlay).convert("RGB")
