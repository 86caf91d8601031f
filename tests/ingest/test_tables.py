"""The one row format shared by tables and records: ``Header: value; Header: value``."""

from __future__ import annotations

from citewell.ingest.tables import format_row, row_headers


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


def test_a_row_reads_back_its_headers() -> None:
    row = format_row(["Day", "Open", "Mechanic on duty"], ["Tuesday", "17:00", "yes"])
    assert row_headers(row) == ("Day", "Open", "Mechanic on duty")


def test_prose_and_a_single_labelled_value_are_not_rows() -> None:
    assert row_headers("Note: the shop is closed on Mondays.") is None
    assert row_headers("Bring tools; the pump: at the desk.") is None
    assert row_headers(format_row(["", "Food"], ["Leaves", "Elm"])) is None  # an unlabelled value
