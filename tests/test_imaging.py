"""Pictures of pages of image sources: the image is the page, its pixels the page coordinates."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageDraw

from citewell.errors import UnsupportedFormat
from citewell.imaging import TINT, ImageFormat, encode, page_image
from citewell.model import Box, Page, Span

WORD = Box(x0=100, y0=60, x1=300, y1=90)
"""Where the test images have a black bar (as if a word)."""


def scan(size: tuple[int, int] = (400, 300), fill: str = "white") -> Image.Image:
    image = Image.new("RGB", size, fill)
    ImageDraw.Draw(image).rectangle((WORD.x0, WORD.y0, WORD.x1 - 1, WORD.y1 - 1), fill="black")
    return image


def saved(*frames: Image.Image, kind: str) -> bytes:
    out = io.BytesIO()
    frames[0].save(out, kind, save_all=len(frames) > 1, append_images=list(frames[1:]))
    return out.getvalue()


def page(number: int = 1, width: float = 400, height: float = 300) -> Page:
    return Page(number=number, span=Span(start=0, end=0), width=width, height=height)


def test_an_image_is_drawn_at_the_width_asked_in_its_proportions() -> None:
    drawn = page_image(saved(scan(), kind="PNG"), "image/png", page(), width=200)
    assert drawn.size == (200, 150)
    pixels = np.asarray(drawn)
    assert (pixels[32:43, 52:148] < 10).all() and (pixels[10, 10] == 255).all()


def test_a_highlight_tints_exactly_the_boxed_pixels_of_an_image() -> None:
    original = saved(scan(), kind="PNG")
    plain = np.asarray(page_image(original, "image/png", page(), width=400))
    lit = np.asarray(page_image(original, "image/png", page(), width=400, boxes=(WORD,)))
    tinted = (plain != lit).any(axis=2)
    assert tinted.sum() == 200 * 30 and tinted[60:90, 100:300].all()
    alpha = TINT[3] / 255
    assert tuple(lit[70, 200]) == tuple(round(c * alpha) for c in TINT[:3])  # on black


def test_a_crop_of_an_image_is_the_boxes_and_a_margin() -> None:
    original = saved(scan(), kind="PNG")
    cropped = page_image(original, "image/png", page(), width=232, boxes=(WORD,), crop=True)
    margin = 0.04 * 400  # CROP_MARGIN of the page's width
    assert cropped.size == (232, round(30 + 2 * margin))
    assert (np.asarray(cropped)[16:46, 16:216] != 255).any(axis=2).all()


def test_each_frame_of_a_tiff_is_a_page() -> None:
    tiff = saved(Image.new("RGB", (400, 300), "white"), scan(fill="grey"), kind="TIFF")
    first = np.asarray(page_image(tiff, "image/tiff", page(1), width=100))
    second = np.asarray(page_image(tiff, "image/tiff", page(2), width=100))
    assert (first == 255).all() and tuple(second[2, 2]) == (128, 128, 128)


def test_page_coordinates_are_scaled_to_the_images_pixels() -> None:
    # A page measured in units other than the image's pixels (OCR at another resolution).
    original = saved(scan(), kind="PNG")
    half = Box(x0=50, y0=30, x1=150, y1=45)
    lit = page_image(original, "image/png", page(width=200, height=150), width=400, boxes=(half,))
    assert tuple(np.asarray(lit)[70, 200]) == tuple(round(c * TINT[3] / 255) for c in TINT[:3])


@pytest.mark.parametrize("image_format", list(ImageFormat))
def test_pictures_encode_as_png_or_webp(image_format: ImageFormat) -> None:
    data = encode(scan(), image_format)
    assert Image.open(io.BytesIO(data)).format == image_format.name
    assert image_format.media_type == f"image/{image_format.value}"


def test_a_source_without_drawable_pages_is_refused() -> None:
    with pytest.raises(UnsupportedFormat):
        page_image(b"plain text", "text/plain", page(), width=100)
