"""Tables in the evidence: rows told apart from prose, and the columns a question names."""

from __future__ import annotations

from citewell.analysis import terms
from citewell.generate.tables import Table, tables
from tests.generate.samples import Doc, evidence

TUESDAY = "Day: Tuesday; Open: 17:00; Close: 21:00"
THURSDAY = "Day: Thursday; Open: 17:00; Close: 21:00"
SATURDAY = "Day: Saturday; Open: 10:00"  # its Close cell is empty, so ingest left it out


def test_consecutive_rows_of_a_passage_with_one_first_header_are_one_table() -> None:
    found = evidence("When is it open?", [Doc(["Opening hours", TUESDAY, THURSDAY, SATURDAY])])
    table = Table(rows=(1, 2, 3), headers=("Day", "Open", "Close"))
    assert tables(found) == {1: table, 2: table, 3: table}


def test_a_lone_row_and_rows_of_two_passages_are_no_table() -> None:
    lone = evidence("When is it open?", [Doc([TUESDAY, "Bring your own lights."])])
    assert tables(lone) == {}
    apart = evidence("When is it open?", [Doc([TUESDAY]), Doc([THURSDAY], filename="b.md")])
    assert tables(apart) == {}


def test_rows_under_another_first_header_start_another_table() -> None:
    prices = ["Plan: Basic; Price: 40 euros", "Plan: Student; Price: 15 euros"]
    found = evidence("What does it cost?", [Doc([TUESDAY, THURSDAY, *prices])])
    assert tables(found)[1].rows == (0, 1)
    assert tables(found)[2] == Table(rows=(2, 3), headers=("Plan", "Price"))


def test_a_question_names_a_column_by_its_headers_stem() -> None:
    table = Table(rows=(0, 1), headers=("Day", "Open", "Mechanic on duty"))
    assert table.named_by(frozenset(terms("When is the workshop open?", "en")), "en")
    assert table.named_by(frozenset(terms("Which mechanics are on duty?", "en")), "en")
    assert not table.named_by(frozenset(terms("How much is a membership?", "en")), "en")
