"""The behaviour every Parser must show. A test module subclasses ``ParserContract`` and
provides a ``parsed`` fixture: a ``ParsedDocument`` the parser made from a real sample."""

from __future__ import annotations

import numpy as np

from citewell.ingest.base import BlockKind, ParsedDocument
from citewell.model import NOT_READ


class ParserContract:
    def test_there_is_text_or_there_are_pages(self, parsed: ParsedDocument) -> None:
        assert parsed.text or parsed.pages
        assert (parsed.text == "") == (parsed.blocks == ())

    def test_blocks_are_in_order_and_do_not_overlap(self, parsed: ParsedDocument) -> None:
        for before, after in zip(parsed.blocks, parsed.blocks[1:], strict=False):
            assert before.span.end <= after.span.start

    def test_blocks_lie_within_the_text_and_are_stripped(self, parsed: ParsedDocument) -> None:
        for block in parsed.blocks:
            assert 0 <= block.span.start < block.span.end <= len(parsed.text)
            text = parsed.text[block.span.start : block.span.end]
            assert text == text.strip()

    def test_only_headings_have_levels(self, parsed: ParsedDocument) -> None:
        for block in parsed.blocks:
            is_heading = block.kind is BlockKind.HEADING
            assert (block.level is not None and block.level >= 1) == is_heading

    def test_heading_paths_name_headings_that_came_before(self, parsed: ParsedDocument) -> None:
        seen: set[str] = set()
        for block in parsed.blocks:
            assert set(block.heading_path) <= seen
            if block.kind is BlockKind.HEADING:
                seen.add(" ".join(parsed.text[block.span.start : block.span.end].split()))

    def test_the_text_outside_blocks_is_whitespace(self, parsed: ParsedDocument) -> None:
        cursor = 0
        for block in parsed.blocks:
            assert parsed.text[cursor : block.span.start].strip() == ""
            cursor = block.span.end
        assert parsed.text[cursor:].strip() == ""

    def test_pages_tile_the_text_in_order(self, parsed: ParsedDocument) -> None:
        if not parsed.pages:
            assert parsed.char_boxes == ()
            return
        assert [page.number for page in parsed.pages] == list(range(1, len(parsed.pages) + 1))
        assert parsed.pages[0].span.start == 0
        assert parsed.pages[-1].span.end == len(parsed.text)
        for before, after in zip(parsed.pages, parsed.pages[1:], strict=False):
            assert before.span.end == after.span.start

    def test_each_page_has_one_box_row_per_character(self, parsed: ParsedDocument) -> None:
        assert len(parsed.char_boxes) == len(parsed.pages)
        for page, boxes in zip(parsed.pages, parsed.char_boxes, strict=False):
            assert boxes.shape == (len(page.span), 4)
            assert boxes.dtype == np.float32

    def test_only_pages_read_by_ocr_have_confidences(self, parsed: ParsedDocument) -> None:
        """One per character on a page OCR read (0-100, or NOT_READ between words); none on a
        page whose text came from the file itself."""
        assert len(parsed.char_confidences) == len(parsed.pages)
        for page, confidences in zip(parsed.pages, parsed.char_confidences, strict=False):
            if page.ocr_confidence is None:
                assert confidences.size == 0
            else:
                assert confidences.shape == (len(page.span),)
                read = confidences[confidences != NOT_READ]
                assert read.size and (read <= 100).all()

    def test_boxes_are_rectangles_on_their_page(self, parsed: ParsedDocument) -> None:
        for page, boxes in zip(parsed.pages, parsed.char_boxes, strict=False):
            real = boxes[~np.isnan(boxes).any(axis=1)]
            assert np.isnan(boxes[np.isnan(boxes).any(axis=1)]).all()  # all or nothing
            x0, y0, x1, y1 = real.T
            assert (x0 <= x1).all() and (y0 <= y1).all()
            slack = 1.0  # glyphs may overhang the page edge by a hair
            assert (x0 >= -slack).all() and (x1 <= page.width + slack).all()
            assert (y0 >= -slack).all() and (y1 <= page.height + slack).all()

    def test_characters_without_a_box_are_whitespace(self, parsed: ParsedDocument) -> None:
        for page, boxes in zip(parsed.pages, parsed.char_boxes, strict=False):
            text = parsed.text[page.span.start : page.span.end]
            unboxed = np.isnan(boxes[:, 0])
            assert all(char.isspace() for char, none in zip(text, unboxed, strict=False) if none)
