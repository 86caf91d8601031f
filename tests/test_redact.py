"""Masking personal data: what is masked, what is not, and that every offset still holds."""

from __future__ import annotations

import pytest

from citewell.redact import MASK, redact

ALL = ("email", "card_number", "phone")


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("Write to ana.lopez+hr@example.co.uk today.", "ana.lopez+hr@example.co.uk"),
        ("Card 4111 1111 1111 1111 expires.", "4111 1111 1111 1111"),
        ("Card 5500-0000-0000-0004 expires.", "5500-0000-0000-0004"),
        ("Llame al +34 912 345 678 hoy.", "+34 912 345 678"),
        ("Call (555) 123-4567 now.", "(555) 123-4567"),
        ("请致电 138 0013 8000。", "138 0013 8000"),
    ],
)
def test_personal_data_is_masked_character_for_character(text: str, masked: str) -> None:
    out = redact(text, ALL)
    start = text.index(masked)
    assert len(out) == len(text)
    assert out == text[:start] + MASK * len(masked) + text[start + len(masked) :]


@pytest.mark.parametrize(
    "text",
    [
        "On 2026-11-30 the shop opened.",  # a date: 8 digits
        "Order 4111 1111 1111 1112 shipped.",  # 16 digits failing the Luhn check (and > 15)
        "Refunds are paid within 30 days; 1,250 euros at most.",
        "Write to the front desk @ reception.",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text, ALL) == text


def test_only_the_kinds_asked_for_are_masked() -> None:
    text = "Mail ana@example.com or call +34 912 345 678."
    assert redact(text, ["email"]) == f"Mail {MASK * 15} or call +34 912 345 678."
    assert redact(text, []) == text
