"""From what OCR read on a page to blocks of the canonical text, every character with a box.

Each paragraph tesseract found becomes a paragraph block, in its reading order. Its lines are
joined by ``\\n`` and its words by a space, except between two CJK characters (tesseract gives
Chinese characters as separate words; Chinese text has no spaces). Joining spaces and line
breaks get no box, as in text PDFs; every other character gets its slice of its word's box
(``ocr.Word.char_boxes``), scaled from pixels to page coordinates, and its word's confidence
(``base.CharConfidences``). No de-hyphenation.
"""

from __future__ import annotations

from citewell.ingest.base import BlockKind, DocumentBuilder
from citewell.ingest.ocr import Box, PageText, Paragraph
from citewell.language import is_cjk
from citewell.model import NOT_READ

__all__ = ["add_page_text"]


def add_page_text(builder: DocumentBuilder, page: PageText, *, scale: float) -> None:
    """Append the paragraphs of ``page`` to the open page of ``builder``; ``scale`` turns
    pixels into page coordinates (1 for images, points per pixel for rendered PDF pages)."""
    for paragraph in page.paragraphs:
        text, boxes, confidences = _paragraph(paragraph, scale)
        builder.add_block(BlockKind.PARAGRAPH, text, boxes=boxes, confidences=confidences)


def _paragraph(paragraph: Paragraph, scale: float) -> tuple[str, list[Box | None], list[int]]:
    parts: list[str] = []
    boxes: list[Box | None] = []
    confidences: list[int] = []
    for line in paragraph.lines:
        for word in line.words:
            if parts:
                joint = "\n" if word is line.words[0] else _joint(parts[-1], word.text)
                parts.append(joint)
                boxes.extend([None] * len(joint))
                confidences.extend([NOT_READ] * len(joint))
            parts.append(word.text)
            boxes.extend(_scaled(box, scale) for box in word.char_boxes)
            confidences.extend([_percent(word.confidence)] * len(word.text))
    return "".join(parts), boxes, confidences


def _percent(confidence: float) -> int:
    return min(100, max(0, round(confidence)))


def _joint(before: str, after: str) -> str:
    return "" if is_cjk(before[-1]) and is_cjk(after[0]) else " "


def _scaled(box: Box, scale: float) -> Box:
    x0, y0, x1, y1 = box
    return (x0 * scale, y0 * scale, x1 * scale, y1 * scale)
