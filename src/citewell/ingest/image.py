"""Images (PNG, JPEG, TIFF, WebP) read by OCR: one page per image, one per frame of a TIFF.

A page is as large as its image, in pixels, so boxes are in pixels; its modality is ``image``.
An image over ``OcrSettings.max_image_pixels`` is refused before its pixels are decoded (Pillow's
own decompression-bomb limit stands behind that). Frames are decoded one at a time, when a
worker of the OCR pool is ready to read them, so a long TIFF is never held whole.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

from PIL import Image, UnidentifiedImageError

from citewell.config import IngestSettings
from citewell.errors import FileTooLarge, ParseError, UnsupportedFormat
from citewell.ingest.base import DocumentBuilder, ParsedDocument
from citewell.ingest.limits import check_limit
from citewell.ingest.ocr import Ocr
from citewell.ingest.ocr_layout import add_page_text
from citewell.model import Modality

__all__ = ["PARSER", "ImageParser"]


class _Frames:
    """The frames of one image file, each decoded on demand (Pillow's seek is not thread-safe)."""

    def __init__(self, image: Image.Image) -> None:
        self._image = image
        self._lock = threading.Lock()
        self.count: int = getattr(image, "n_frames", 1)

    def size(self, index: int) -> tuple[int, int]:
        with self._lock:
            self._image.seek(index)
            return self._image.size

    def frame(self, index: int) -> Image.Image:
        with self._lock:
            self._image.seek(index)
            return self._image.copy()


@contextmanager
def _image_errors(filename: str) -> Iterator[None]:
    """Pillow's failures on bad bytes, as the errors of the file they are."""
    try:
        yield
    except Image.DecompressionBombError as exc:
        raise FileTooLarge(f"{filename} has too many pixels ({exc})", filename=filename) from None
    except UnidentifiedImageError:
        raise ParseError(
            f"{filename} is a damaged image: Pillow cannot read its header", filename=filename
        ) from None
    except (OSError, ValueError, SyntaxError) as exc:
        raise ParseError(
            f"{filename} is a damaged or truncated image ({exc})", filename=filename
        ) from None


class ImageParser:
    media_types: tuple[str, ...] = ("image/png", "image/jpeg", "image/tiff", "image/webp")

    def parse(
        self, data: bytes, *, filename: str, limits: IngestSettings, ocr: Ocr | None = None
    ) -> ParsedDocument:
        if ocr is None:
            raise UnsupportedFormat(f"{filename}: an image can only be read with OCR")
        with _image_errors(filename), Image.open(io.BytesIO(data)) as image:
            frames = _Frames(image)
            check_limit(
                frames.count, limits.max_pages, what="pages", setting="max_pages", filename=filename
            )
            check_limit(
                frames.count,
                limits.max_ocr_pages,
                what="pages to read with OCR",
                setting="max_ocr_pages",
                filename=filename,
            )
            sizes = [frames.size(index) for index in range(frames.count)]
            for width, height in sizes:
                _check_pixels(width * height, ocr.settings.max_image_pixels, filename)
            image.load()  # the first frame now: a truncated file fails before OCR is under way
            texts = ocr.read([partial(frames.frame, index) for index in range(frames.count)])
        builder = DocumentBuilder()
        for number, ((width, height), text) in enumerate(zip(sizes, texts, strict=True), start=1):
            builder.start_page(
                number,
                width=width,
                height=height,
                modality=Modality.IMAGE,
                ocr_confidence=text.confidence,
            )
            add_page_text(builder, text, scale=1.0)
            builder.end_page()
        return builder.build()


def _check_pixels(pixels: int, limit: int, filename: str) -> None:
    if pixels > limit:
        raise FileTooLarge(
            f"{filename} has an image of {pixels:,} pixels; the limit is {limit:,} "
            "(CITEWELL_OCR__MAX_IMAGE_PIXELS)",
            filename=filename,
        )


PARSER = ImageParser()
