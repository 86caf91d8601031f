"""Citation markers in streamed model text: stripped, remembered, and the same however cut."""

from __future__ import annotations

import itertools

import pytest

from citewell.cite.markers import Marker, MarkerStream, strip_markers


def markers(text: str, count: int = 9) -> tuple[str, list[tuple[int, int]]]:
    clean, found = strip_markers(text, count)
    return clean, [(m.offset, m.number) for m in found]


@pytest.mark.parametrize(
    "marked",
    [
        "Refunds take 30 days [3].",
        "Refunds take 30 days [ 3 ].",
        "Refunds take 30 days [E3].",
        "Refunds take 30 days 【3】.",
        "Refunds take 30 days [３].",  # full-width digit
    ],
)
def test_each_accepted_form_of_one_marker(marked: str) -> None:
    assert markers(marked) == ("Refunds take 30 days.", [(20, 3)])


@pytest.mark.parametrize(
    "marked",
    [
        "Refunds take 30 days [3, 7].",
        "Refunds take 30 days [3; 7].",
        "Refunds take 30 days [3][7].",
        "Refunds take 30 days [3] [7].",
        "Refunds take 30 days 【3，7】.",
        "Refunds take 30 days 【3、7】.",
        "Refunds take 30 days [E3, E7].",
    ],
)
def test_each_accepted_form_of_several_numbers(marked: str) -> None:
    assert markers(marked) == ("Refunds take 30 days.", [(20, 3), (20, 7)])


@pytest.mark.parametrize(
    "text",
    [
        "He said [sic] so.",
        "Options [a] and [b].",
        "Pages [1-2] matter.",
        'JSON {"tags": ["a", "b"]} stays.',
        "Empty [] and spaced [ ] brackets.",
        "A number too long [12345].",
    ],
)
def test_brackets_holding_anything_else_stay_as_written(text: str) -> None:
    assert markers(text) == (text, [])


def test_numbers_naming_no_evidence_are_dropped_but_their_marker_removed() -> None:
    assert markers("Refunds take 30 days [0][4][12].", count=4) == (
        "Refunds take 30 days.",
        [(20, 4)],
    )


def test_a_repeated_number_at_one_place_counts_once() -> None:
    assert markers("Refunds take 30 days [3][3].") == ("Refunds take 30 days.", [(20, 3)])


def test_a_marker_after_the_full_stop_cites_the_sentence_before_it() -> None:
    clean, found = markers("Refunds take 30 days. [3]\nGift cards are final [4].")
    assert clean == "Refunds take 30 days.\nGift cards are final."
    assert found == [(21, 3), (42, 4)]


def test_a_marker_opening_a_line_takes_the_spaces_after_it() -> None:
    assert markers("[3] Refunds take 30 days.") == ("Refunds take 30 days.", [(0, 3)])
    clean, found = markers("Intro:\n[2] Refunds.")
    assert clean == "Intro:\nRefunds."
    assert found == [(6, 2)]


def test_no_double_space_is_left_where_a_marker_stood() -> None:
    assert markers("Refunds [1] take 30 days [2] in all.")[0] == "Refunds take 30 days in all."


def test_an_unfinished_marker_at_the_end_is_text() -> None:
    assert markers("Refunds take 30 days [3") == ("Refunds take 30 days [3", [])


def test_numbers_between_selects_by_offset() -> None:
    stream = MarkerStream(9)
    clean = stream.feed("A [1]. B [2][3]. C [4].") + stream.flush()
    assert clean == "A. B. C."
    assert stream.markers == (Marker(1, 1), Marker(4, 2), Marker(4, 3), Marker(7, 4))
    assert stream.numbers_between(0, 3) == [1]
    assert stream.numbers_between(3, 6) == [2, 3]
    assert stream.numbers_between(6, 7) == []
    assert stream.numbers_between(6, 7, inclusive=True) == [4]


# However the text is cut --------------------------------------------------------------------------

TEXTS = [
    "Refunds take 30 days [3]. Gift cards are final [4][2].\n[1] Next line.",
    "Shipping is free 【3，7】 over $50 [sic]. Orders ship [E4] fast [12345] [",
    "Ends with a partial marker [3, ",
    "Spaces   [3]   around. [a] [ 2 ]",
]


@pytest.mark.parametrize("text", TEXTS)
def test_any_two_cuts_give_the_same_clean_text_and_markers(text: str) -> None:
    whole = strip_markers(text, 9)
    for i, j in itertools.combinations(range(len(text) + 1), 2):
        stream = MarkerStream(9)
        clean = "".join(stream.feed(p) for p in (text[:i], text[i:j], text[j:])) + stream.flush()
        assert (clean, stream.markers) == whole, (i, j)


@pytest.mark.parametrize("text", TEXTS)
def test_character_by_character_gives_the_same_result(text: str) -> None:
    stream = MarkerStream(9)
    clean = "".join(stream.feed(ch) for ch in text) + stream.flush()
    assert (clean, stream.markers) == strip_markers(text, 9)


def test_clean_text_is_released_as_soon_as_it_is_certain() -> None:
    stream = MarkerStream(9)
    assert stream.feed("Refunds take") == "Refunds take"
    assert stream.feed(" 30 days [") == " 30 days"  # the bracket may open a marker
    assert stream.feed("3") == ""
    assert stream.feed("].") == "."
    assert stream.feed(" Next [") == " Next"
    assert stream.feed("sic") == " [sic"  # a letter: it cannot be a marker any more
    assert stream.feed("]") == "]"
