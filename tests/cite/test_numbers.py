"""Numbers are compared as values, however a text spells them."""

from __future__ import annotations

import pytest

from citewell.cite.numbers import numbers, without_numbers


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Refunds take 30 days.", {"30"}),
        ("Refunds take thirty days.", {"30"}),
        ("Los reembolsos tardan treinta días.", {"30"}),
        ("It cost 1,000 dollars, or 1.000 euros.", {"1000"}),
        ("Una tasa del 2,5 por ciento.", {"2.5"}),
        ("Founded in １９０５.", {"1905"}),
        ("退款需要30天。", {"30"}),
        ("One of them said so.", set()),
        ("A phone and a fifteenth of it", set()),
    ],
)
def test_numbers_are_read_in_digits(text: str, expected: set[str]) -> None:
    assert numbers(text) == expected


def test_without_numbers_leaves_the_words_around_them() -> None:
    assert without_numbers("Refunds take thirty days, or 1,000 hours.").split() == [
        "Refunds",
        "take",
        "days,",
        "or",
        "hours.",
    ]
