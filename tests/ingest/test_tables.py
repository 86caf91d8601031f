"""The one row format shared by tables and records: ``Header: value; Header: value``."""

from __future__ import annotations

from citewell.ingest.tables import format_row


def test_values_are_paired_with_their_headers() -> None:
    assert format_row(["Plan", "Price", "Seats"], ["Pro", "$20", "5"]) == (
        "Plan: Pro; Price: $20; Seats: 5"
    )


def test_empty_values_are_left_out_and_whitespace_collapses() -> None:
    assert format_row(["Plan", " Monthly\nprice ", "Seats"], [" Free ", "", "1\t"]) == (
        "Plan: Free; Seats: 1"
    )


def test_a_value_without_a_header_stands_alone() -> None:
    assert format_row(["", "Food"], ["Leaves", "Elm"]) == "Leaves; Food: Elm"
    assert format_row(["a"], ["1", "2"]) == "a: 1; 2"
    assert format_row([], ["x", "y"]) == "x; y"


def test_headers_beyond_the_values_are_ignored() -> None:
    assert format_row(["a", "b", "c"], ["1"]) == "a: 1"
