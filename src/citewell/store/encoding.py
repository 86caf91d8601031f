"""How a page's per-character data is kept in a database column: compressed arrays."""

from __future__ import annotations

import zlib

import numpy as np

from citewell.model import CharBoxes, CharConfidences

__all__ = ["pack_boxes", "pack_confidences", "unpack_boxes", "unpack_confidences"]


def pack_boxes(boxes: CharBoxes) -> bytes:
    """zlib of float32 (n, 4): one box per code point of the page."""
    return zlib.compress(np.ascontiguousarray(boxes, dtype=np.float32).tobytes())


def unpack_boxes(stored: bytes) -> CharBoxes:
    return np.frombuffer(zlib.decompress(stored), dtype=np.float32).reshape(-1, 4)


def pack_confidences(read: CharConfidences | None) -> bytes | None:
    """zlib of uint8, one per code point; None where OCR did not read the page."""
    return zlib.compress(read.tobytes()) if read is not None and read.size else None


def unpack_confidences(stored: bytes | None) -> CharConfidences:
    """Empty where OCR did not read the page."""
    return np.frombuffer(zlib.decompress(stored) if stored else b"", dtype=np.uint8)
