"""The figures on hand-made outcomes, with exact values and interval bounds."""

from __future__ import annotations

import pytest

from citewell.cite.writer import part_refusal
from citewell.evaluate.loaders import Case, Evidence
from citewell.evaluate.metrics import (
    Cited,
    Outcome,
    bootstrap_mean,
    figures,
    token_f1,
    wilson,
)

REFUSAL = "The available sources do not answer this question."


def case(id: str, *, answerable: bool = True, evidence: tuple[Evidence, ...] = ()) -> Case:
    return Case(
        id=id,
        language="en",
        question="?",
        answers=("Paris",) if answerable else (),
        evidence=evidence if answerable else (),
        answerable=answerable,
        bucket="b",
        documents=("a.txt",),
    )


GOLD = (Evidence("a.txt", 10, 15, "Paris"),)


def cite(start: int, end: int, claim: tuple[int, int], filename: str = "a.txt") -> Cited:
    return Cited(claim[0], claim[1], filename, start, end, "")


def test_wilson_interval_matches_the_formula() -> None:
    figure = wilson(8, 10)
    assert figure.value == 0.8
    assert figure.low == pytest.approx(0.4901624715, abs=1e-9)
    assert figure.high == pytest.approx(0.9433178486, abs=1e-9)
    assert wilson(0, 5).low == 0.0 and wilson(0, 5).high == pytest.approx(0.4344824748)
    assert wilson(0, 0).value is None


def test_bootstrap_is_reproducible_and_brackets_the_mean() -> None:
    values = [0.0, 1.0, 1.0, 0.5]
    figure = bootstrap_mean(values)
    assert figure == bootstrap_mean(values)
    assert figure.value == 0.625
    assert figure.low is not None and figure.high is not None
    assert 0.0 <= figure.low <= 0.625 <= figure.high <= 1.0
    assert bootstrap_mean([0.5, 0.5]).low == bootstrap_mean([0.5, 0.5]).high == 0.5


def test_token_f1_counts_shared_words_and_cjk_characters() -> None:
    assert token_f1("The capital is Paris.", "Paris") == pytest.approx(2 * 0.25 * 1 / 1.25)
    assert token_f1("北京大兴", "大兴机场") == pytest.approx(0.5)
    assert token_f1("", "Paris") == 0.0


def test_figures_on_hand_made_outcomes() -> None:
    text = "It is Paris. It is big."  # two claims: [0, 12) and [13, 23)
    pairs = [
        # Answered: one precise citation on claim 1, one imprecise on claim 2.
        (
            case("1", evidence=GOLD),
            Outcome(
                text,
                (cite(10, 15, (0, 12)), cite(30, 40, (13, 23))),
                False,
                (("a.txt", "xx Paris xx"),),
                1.0,
            ),
        ),
        # Answered wrongly with one citation in another file; gold not retrieved.
        (
            case("2", evidence=GOLD),
            Outcome("Lyon.", (cite(10, 15, (0, 5), "b.txt"),), False, (("b.txt", "Lyon"),), 1.0),
        ),
        # A false refusal.
        (case("3", evidence=GOLD), Outcome(REFUSAL, (), True, (), 1.0)),
        # Unanswerable: one declined, one not.
        (case("4", answerable=False), Outcome(REFUSAL, (), True, None, 1.0)),
        (case("5", answerable=False), Outcome("Rome.", (), False, None, 1.0)),
    ]
    got = figures(pairs, [REFUSAL])
    assert got["retrieval_hit_rate"].value == pytest.approx(1 / 3)
    assert got["retrieval_hit_rate"].n == 3
    assert got["citation_precision"].value == pytest.approx(1 / 3)
    assert got["citation_precision"].n == 3
    assert got["citation_precision"].low == pytest.approx(wilson(1, 3).low)
    assert got["citation_completeness"].value == pytest.approx(1 / 3)  # 1 of 3 claims
    assert got["refusal_unanswerable"].value == 0.5
    assert got["false_refusal"].value == pytest.approx(1 / 3)
    assert got["contains_gold"].value == pytest.approx(1 / 3)
    assert got["contains_gold"].high == pytest.approx(wilson(1, 3).high)
    f1 = [token_f1(text, "Paris"), 0.0, 0.0]
    assert got["token_f1"].value == pytest.approx(sum(f1) / 3)


def test_citation_without_gold_ranges_is_judged_by_the_verifier() -> None:
    pairs = [(case("1"), Outcome("Paris.", (cite(0, 5, (0, 6)),), False, None, 1.0))]
    got = figures(pairs, [REFUSAL])
    assert got["citation_precision"].value == 1.0
    assert got["retrieval_hit_rate"].n == 0


def test_failed_requests_are_left_out() -> None:
    pairs = [(case("1", evidence=GOLD), Outcome("", (), False, None, 0.0, error="boom"))]
    assert figures(pairs, [REFUSAL])["false_refusal"].n == 0


def test_a_question_in_two_parts_is_complete_only_when_both_are_cited() -> None:
    first, second = Evidence("a.txt", 10, 15, "Paris"), Evidence("a.txt", 40, 44, "1901")
    asked = Case(
        id="1+2",
        language="en",
        question="Where is it? And when was it built?",
        answers=(),
        evidence=(first, second),
        answerable=True,
        bucket="b",
        documents=("a.txt",),
        parts=((first,), (second,)),
    )
    both = Outcome(
        "In Paris. In 1901.", (cite(8, 16, (0, 9)), cite(38, 46, (10, 18))), False, None, 1
    )
    one = Outcome("In Paris.", (cite(8, 16, (0, 9)),), False, None, 1)
    declined = Outcome(REFUSAL, (), True, None, 1)

    got = figures([(asked, both), (asked, one), (asked, declined)], [REFUSAL])

    assert got["every_part_cited"].value == pytest.approx(1 / 3)
    assert got["every_part_cited"].n == 3
    assert figures([(case("x", evidence=GOLD), both)], [])["every_part_cited"].n == 0


def test_a_disagreement_is_flagged_when_both_its_sides_are_marked_and_answered_current_first() -> (
    None
):
    planted = Case(
        id="planted",
        language="en",
        question="?",
        answers=("30",),
        evidence=(Evidence("new.txt", 0, 2, "30"), Evidence("old.txt", 0, 2, "14")),
        answerable=True,
        bucket="b",
        documents=("new.txt", "old.txt"),
        conflict=("new.txt", "old.txt"),
    )
    both = (("new.txt", "current"), ("old.txt", "older"))
    current_first = (cite(0, 2, (0, 5), "new.txt"), cite(0, 2, (6, 9), "old.txt"))
    older_first = tuple(reversed(current_first))
    pairs = [
        (planted, Outcome("30 14", current_first, False, (), 1.0, conflict_sides=both)),
        (planted, Outcome("14 30", older_first, False, (), 1.0, conflict_sides=both)),
        (planted, Outcome("30", current_first[:1], False, (), 1.0, conflict_sides=both[:1])),
        # Declined: flagged in its results, but no side cited first (false refusal counts it).
        (planted, Outcome(REFUSAL, (), True, (), 1.0, conflict_sides=both)),
        # An ordinary question: a disagreement claimed there is a false one.
        (case("plain", evidence=GOLD), Outcome("Paris", (), False, (), 1.0, conflict_sides=both)),
        (case("other", evidence=GOLD), Outcome("Paris", (), False, (), 1.0, conflict_sides=())),
        # A surface that shows no results says nothing of disagreements.
        (planted, Outcome("30", current_first, False, None, 1.0)),
    ]
    result = figures(pairs, [REFUSAL])
    assert result["conflict_flagged"].value == pytest.approx(3 / 4)
    assert result["current_cited_first"].value == pytest.approx(2 / 3)
    assert result["current_cited_first"].n == 3
    assert result["false_conflict"].value == 0.5 and result["false_conflict"].n == 2


def test_saying_the_sources_do_not_answer_a_part_is_not_a_claim_left_uncited() -> None:
    said = "In Paris. " + part_refusal("When was it built?", "en")
    pairs = [(case("1", evidence=GOLD), Outcome(said, (cite(10, 15, (0, 9)),), False, None, 1.0))]
    got = figures(pairs, [REFUSAL])
    assert got["citation_completeness"].value == 1.0
    assert got["citation_completeness"].n == 1
    assert got["false_refusal"].value == 0.0  # an answer to the other part is no refusal
