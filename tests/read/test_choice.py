"""The sentence choice fitted on the calibration part: whichever judge is more often right in a
language picks that language's sentences."""

from __future__ import annotations

from citewell.generate.extractive import word_pick
from citewell.model import SentenceChoice, WordAnswer
from citewell.read.training.choice import Pick, by_chance, fit_choices, word_picks
from citewell.read.training.data import Group

WORD_FIRST = SentenceChoice()


def pick(language: str, word: int | None, read: tuple[int, float], gold: set[int]) -> Pick:
    """A question word overlap answers with sentence ``word`` (None: declines)."""
    return Pick(language, WordAnswer(() if word is None else (word,)), read, frozenset(gold))


def test_a_right_answer_is_worth_one_a_wrong_one_nothing() -> None:
    right = pick("en", 0, (1, 0.9), {0})
    wrong = pick("en", 1, (0, 0.9), {0})
    assert right.worth(WORD_FIRST) == 1.0
    assert wrong.worth(WORD_FIRST) == 0.0


def test_saying_both_is_worth_the_share_of_the_two_that_answers() -> None:
    word_right = pick("en", 0, (1, 0.9), {0})
    assert word_right.worth(SentenceChoice(both=0.5)) == 0.5
    both_right = pick("en", 0, (1, 0.9), {0, 1})
    assert both_right.worth(SentenceChoice(both=0.5)) == 1.0


def test_the_choice_never_declines_a_part_the_reader_answered() -> None:
    # Word overlap would decline: the reader's likeliest answers, however unsure, for whether
    # the part is answered was the decline rule's to say.
    for choice in (WORD_FIRST, SentenceChoice(reader_first=0.9, both=0.9)):
        assert choice.answer(WordAnswer(), (3, 0.05)) == [3]
    assert pick("en", None, (0, 0.05), {0}).worth(WORD_FIRST) == 1.0
    assert WORD_FIRST.answer(WordAnswer(), None) == []  # nothing was read


def test_each_language_gets_the_judge_that_is_right_more_often_there() -> None:
    # In English word overlap is right and the reader wrong; in Chinese the other way round,
    # the reader sure (0.8) where it is right.
    found = [pick("en", 0, (1, 0.8), {0}) for _ in range(5)]
    found += [pick("zh", 0, (1, 0.8), {1}) for _ in range(5)]
    choices, figures = fit_choices(found)
    assert choices["en"].answer(WordAnswer((0,)), (1, 0.8)) == [0]
    assert choices["zh"].answer(WordAnswer((0,)), (1, 0.8)) == [1]
    assert figures["zh"] == {
        "questions": 5,
        "word overlap's pick": 0.0,
        "the reader's likeliest": 1.0,
        "best": 1.0,
        "best's gain by chance": 0.0312,  # right on all 5 where they differ: 1 in 32
        "fitted": 1.0,
    }


def test_a_gain_the_calibration_part_could_show_by_chance_keeps_word_overlaps_pick_first() -> None:
    found = [pick("en", 0, (1, 0.8), {1}) for _ in range(6)]  # the reader right, 6 times
    found += [pick("en", 0, (1, 0.8), {0}) for _ in range(4)]  # word overlap right, 4 times
    choices, figures = fit_choices(found)
    assert choices["en"] == SentenceChoice()
    assert figures["en"] == {
        "questions": 10,
        "word overlap's pick": 0.4,
        "the reader's likeliest": 0.6,
        "best": 0.6,
        "best's gain by chance": 0.377,  # 6 or more of 10 fair coins
        "fitted": 0.4,
    }


def test_by_chance_is_a_one_sided_sign_test() -> None:
    assert by_chance(5, 0) == 1 / 32
    assert by_chance(6, 4) == (210 + 120 + 45 + 10 + 1) / 1024
    assert by_chance(0, 3) == 1.0
    assert by_chance(0, 0) == 1.0  # the two never differ: nothing to gain


def test_a_tables_rows_that_answer_together_are_said_whatever_the_reader_reads() -> None:
    hours = WordAnswer((2, 3, 4), listed=True)  # a row a day
    assert SentenceChoice(reader_first=0.0).answer(hours, (0, 0.99)) == [2, 3, 4]
    prose = WordAnswer((2, 3))  # a rule and its exception: the reader may still say its own
    assert SentenceChoice(reader_first=0.0).answer(prose, (0, 0.99)) == [0]


def test_the_reader_goes_first_from_where_its_scores_start_to_be_right() -> None:
    found = [pick("es", 1, (0, 0.35), {0}) for _ in range(6)]  # the reader right at 0.35
    found += [pick("es", 1, (0, 0.15), {1}) for _ in range(6)]  # word overlap right at 0.15
    choices, _ = fit_choices(found)
    assert 0.15 < choices["es"].reader_first <= 0.35
    assert choices["es"].both == choices["es"].reader_first  # saying both never pays here


def test_among_equally_good_choices_the_one_closest_to_word_overlap_is_kept() -> None:
    choices, _ = fit_choices([pick("en", 0, (0, 0.9), {0})])  # both judges agree: any fits
    assert choices["en"] == SentenceChoice(reader_first=1.01, both=1.01)
    assert set(choices) == {"en", "*"}


def test_word_overlap_answers_a_question_group_as_the_engine_would_and_no_claim() -> None:
    group = Group(
        task="answers",
        dataset="xquad-en",
        language="en",
        first="When does the shop open?",
        candidates=["Membership costs forty euros.", "The shop opens at 9:00."],
        labels=[0, 1],
        contexts=["Shop", "Shop"],
    )
    claim = Group("supports", "snli", "en", "A shop.", ["The shop opens at 9:00."], [1])
    # Word overlap answers with the opening time, a time for "when"; a claim it does not answer.
    assert word_picks([group, claim], word_pick) == [WordAnswer((1,), typed=True), WordAnswer()]
