"""The labels a reader sees next to a citation."""

from __future__ import annotations

import pytest

from citewell.locator import locator_label, source_label


@pytest.mark.parametrize(
    ("page_number", "page_label", "heading_path", "expected"),
    [
        (4, None, (), "p. 4"),
        (4, "4", (), "p. 4"),
        (4, "iv", (), "p. iv"),
        (12, "A-3", (), "p. A-3"),
        (4, "  ", (), "p. 4"),
        (4, None, ("Guide", "Refunds"), "p. 4"),
        (None, None, ("Guide", "Refunds"), "§ Refunds"),
        (None, None, ("Guide", "  Refunds\n policy "), "§ Refunds policy"),
        (None, None, ("Guide", ""), "§ Guide"),
        (None, None, (), None),
    ],
)
def test_locator_label(
    page_number: int | None, page_label: str | None, heading_path: tuple[str, ...], expected: str
) -> None:
    assert (
        locator_label(page_number=page_number, page_label=page_label, heading_path=heading_path)
        == expected
    )


def test_a_long_heading_is_shortened_to_one_line() -> None:
    label = locator_label(page_number=None, page_label=None, heading_path=("x" * 100,))
    assert label == "§ " + "x" * 59 + "…"


def test_source_label_adds_the_locator_in_parentheses() -> None:
    assert source_label("handbook.pdf", "p. 4") == "handbook.pdf (p. 4)"
    assert source_label("faq.md", "§ Refunds") == "faq.md (§ Refunds)"
    assert source_label("note.txt", None) == "note.txt"
