"""Sources that disagree: the same statement with another value, in two sources, about one part
of the question; the later-dated source first."""

from __future__ import annotations

import datetime as dt

import pytest

from citewell.conflicts import differing_values, find_conflict
from citewell.model import Conflict
from tests.generate.samples import Doc, evidence

QUESTION = "How long do I have to ask for a refund?"
HANDBOOK_2025 = Doc(
    ["Refunds are accepted within 30 days with a receipt.", "Gift cards never expire."],
    filename="handbook-2025.md",
    effective_date=dt.date(2025, 1, 1),
)
LEAFLET_2023 = Doc(
    ["Refunds are accepted within 14 days with a receipt.", "Gift cards never expire."],
    filename="leaflet-2023.md",
    effective_date=dt.date(2023, 3, 1),
)


@pytest.mark.parametrize(
    ("first", "second", "values"),
    [
        (
            "Refunds are accepted within 30 days with a receipt.",
            "Refunds are accepted within 14 days with a receipt.",
            ("30", "14"),
        ),
        (
            "Refunds are accepted within 30 days with a receipt.",
            "Refunds are accepted within two weeks with a receipt.",
            ("30 days", "two weeks"),
        ),
        (
            "The Broncos defeated the Panthers 24–10 in Super Bowl 50.",
            "The Broncos defeated the Cardinals 24–10 in Super Bowl 50.",
            ("Panthers", "Cardinals"),
        ),
        (
            "Los reembolsos se aceptan en 30 días.",
            "Los reembolsos se aceptan en 14 días.",
            ("30", "14"),
        ),
        ("东汉末年，曹操统一了北方。", "东汉末年，刘备统一了北方。", ("曹操", "刘备")),
        (
            "The library opens at 9:30 on weekdays.",
            "The library opens at 10:00 on weekdays.",
            ("9:30", "10:00"),
        ),
        # One denies what the other states, the word it negates included.
        (
            "Pets are allowed in the workshop.",
            "Pets are not allowed in the workshop.",
            ("allowed", "not allowed"),
        ),
        (
            "Los perros están permitidos en el taller.",
            "Los perros no están permitidos en el taller.",
            ("están", "no están"),
        ),
        ("宠物可以进入工作室。", "宠物不可以进入工作室。", ("可", "不可")),
    ],
)
def test_one_statement_with_another_value_or_denied_is_a_disagreement(
    first: str, second: str, values: tuple[str, str]
) -> None:
    assert differing_values(first, second) == values


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # The same value: the sources agree.
        ("Refunds are accepted within 30 days.", "Refunds are accepted within 30 days."),
        # Other words around the same value: a rewording, not a disagreement.
        ("Refunds are accepted within 30 days.", "Refunds are welcome within 30 days."),
        # Two different statements.
        ("Membership costs 40 euros a year.", "Tools stay in the workshop except the pump."),
        # A value on one side only: one says more, not something else.
        ("Refunds are accepted within 30 days.", "Refunds are accepted."),
        # Denied alike in other words.
        ("Gift cards never expire.", "Gift cards do not expire."),
    ],
)
def test_agreement_rewording_and_unrelated_sentences_are_not_disagreements(
    first: str, second: str
) -> None:
    assert differing_values(first, second) is None


def test_the_later_dated_source_is_preferred_whichever_was_read_first() -> None:
    for docs in ([HANDBOOK_2025, LEAFLET_2023], [LEAFLET_2023, HANDBOOK_2025]):
        found = evidence(QUESTION, docs)
        current = next(s.number for s in found.sentences if "30 days" in s.text)
        older = next(s.number for s in found.sentences if "14 days" in s.text)
        # The part's answers as the reader ranked them: the older one first.
        assert find_conflict(found, [older, current]) == Conflict(
            preferred=current, other=older, values=("30", "14"), decided=True
        )


def test_with_no_date_to_choose_by_neither_source_is_preferred() -> None:
    undated = [Doc(d.sentences, filename=d.filename) for d in (LEAFLET_2023, HANDBOOK_2025)]
    found = evidence(QUESTION, undated)
    conflict = find_conflict(found, [1, 3])
    assert conflict == Conflict(preferred=1, other=3, values=("14", "30"), decided=False)


def test_one_source_repeating_itself_is_not_a_conflict() -> None:
    found = evidence(QUESTION, [Doc([*HANDBOOK_2025.sentences, *LEAFLET_2023.sentences])])
    assert find_conflict(found, [1, 3]) is None


def test_a_conflict_starts_from_the_parts_answers_and_finds_its_other_side_anywhere() -> None:
    found = evidence(QUESTION, [HANDBOOK_2025, LEAFLET_2023])
    # The gift-card sentences agree: a part they answer has no conflict, though the refund
    # sentences beside them disagree.
    assert find_conflict(found, [2, 4]) is None
    # A part answered by the 2025 refund sentence alone: the leaflet's is found all the same.
    assert find_conflict(found, [1]) == Conflict(
        preferred=1, other=3, values=("30", "14"), decided=True
    )


@pytest.mark.parametrize(
    ("decided", "sides"), [(True, ("current", "older")), (False, ("undated", "undated"))]
)
def test_each_side_of_a_conflict_is_named_and_no_other_sentence(
    decided: bool, sides: tuple[str, str]
) -> None:
    conflict = Conflict(preferred=3, other=1, values=("30", "14"), decided=decided)
    assert (conflict.side_of(3), conflict.side_of(1), conflict.side_of(2)) == (*sides, None)
