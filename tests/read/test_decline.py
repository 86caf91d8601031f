"""The decline rule fitted on the calibration part: as many unanswerable questions declined as
possible, at most a set share of the answerable ones, with a lower threshold where word overlap
would answer too."""

from __future__ import annotations

import dataclasses

import pytest

from citewell.model import DeclineRule
from citewell.read.training.decline import (
    MIN_ANSWERABLE,
    Asked,
    decline_threshold,
    fit_decline_rules,
)


def test_the_decline_threshold_lies_between_answerable_and_unanswerable_best_scores() -> None:
    best = [0.9, 0.8, 0.7, 0.35, 0.3, 0.1]
    answerable = [True, True, True, False, False, False]
    assert decline_threshold(best, answerable) == pytest.approx((0.7 + 0.35) / 2)


def test_the_decline_threshold_declines_at_most_the_given_share_of_answerable_questions() -> None:
    answered = [0.95, 0.9, 0.9, 0.85, 0.8, 0.8, 0.75, 0.7, 0.6, 0.2]
    unanswered = [0.65, 0.5, 0.4, 0.1]
    best, answerable = answered + unanswered, [True] * 10 + [False] * 4
    threshold = decline_threshold(best, answerable, false_refusal=0.1)
    assert threshold == pytest.approx((0.6 + 0.5) / 2)  # 0.2 declined, 0.6 kept
    assert decline_threshold(best, answerable, false_refusal=0.0) == pytest.approx(0.15)
    assert decline_threshold(best, answerable, false_refusal=0.2) == pytest.approx(0.675)


def test_by_default_at_most_8_percent_of_the_answerable_questions_are_declined() -> None:
    answered = [0.9] * 22 + [0.4, 0.3, 0.2]  # 2 of 25 is 8 %, 3 would be 12 %
    unanswered = [0.25, 0.1]
    threshold = decline_threshold(answered + unanswered, [True] * 25 + [False] * 2)
    assert threshold == pytest.approx((0.4 + 0.3) / 2)
    assert sum(score < threshold for score in answered) == 2


def test_with_nothing_to_tell_apart_the_threshold_stays_even() -> None:
    assert decline_threshold([0.9, 0.2], [True, True]) == 0.5
    assert decline_threshold([], []) == 0.5


def test_a_part_word_overlap_answers_too_needs_less_of_the_reader() -> None:
    rule = DeclineRule(worded=0.3, unworded=0.6)
    assert rule.answers(0.4, worded=True)
    assert not rule.answers(0.4, worded=False)
    assert DeclineRule.single(0.4).answers(0.4, worded=False)


def sample(
    worded: bool, answered: list[float], unanswered: list[float], language: str = "en"
) -> list[Asked]:
    return [Asked(language, True, a, worded) for a in answered] + [
        Asked(language, False, a, worded) for a in unanswered
    ]


def fit(questions: list[Asked], language: str = "en") -> tuple[DeclineRule, dict[str, float]]:
    rules, figures = fit_decline_rules(questions)
    assert rules["*"] == rules[language]
    return rules[language], figures[language]


def test_where_the_judges_disagree_more_is_declined_within_the_same_false_refusals() -> None:
    # One threshold cannot decline the unworded unanswerable 0.5s without five worded
    # answerable 0.45s, past the 8 % of 50 allowed; two thresholds decline every unanswerable.
    questions = sample(True, [0.9] * 20 + [0.45] * 5, [0.35] * 5)
    questions += sample(False, [0.8] * 25, [0.5] * 10)
    rule, figures = fit(questions)
    assert rule.worded == pytest.approx((0.45 + 0.35) / 2)
    assert rule.unworded == pytest.approx((0.8 + 0.5) / 2)
    assert figures["refusal"] == 1.0 and figures["false refusal"] == 0.0
    assert figures["single refusal"] == round(5 / 15, 4)


def test_a_part_word_overlap_answers_never_needs_more_of_the_reader() -> None:
    # Unanswerable questions worded like their paragraph, answerable ones asked in other words
    # (SQuAD 2.0's, read as served): a free fit would decline the worded 0.6s at 0.75 and the
    # unworded 0.1s at 0.2. Kept the right way round, one threshold declines the 0.1s alone.
    questions = sample(True, [0.9] * 25, [0.6] * 10) + sample(False, [0.3] * 25, [0.1] * 5)
    rule, figures = fit(questions)
    assert rule == DeclineRule.single((0.3 + 0.1) / 2)
    assert figures["refusal"] == round(5 / 15, 4) and figures["false refusal"] == 0.0


def test_with_too_few_answerable_questions_on_a_side_a_language_gets_one_threshold() -> None:
    few = MIN_ANSWERABLE - 1
    questions = sample(True, [0.9] * 40, [0.2] * 5) + sample(False, [0.8] * few, [0.5] * 10)
    rule, figures = fit(questions)
    assert rule.worded == rule.unworded == figures["single threshold"]


def test_each_language_gets_its_own_rule_and_any_other_the_rule_of_all() -> None:
    english = sample(True, [0.9] * 30, [0.1] * 5) + sample(False, [0.9] * 30, [0.1] * 5)
    chinese = sample(True, [0.6] * 30, [0.5] * 5, "zh") + sample(False, [0.6] * 30, [0.5] * 5, "zh")
    rules, _ = fit_decline_rules(english + chinese)
    assert set(rules) == {"en", "zh", "*"}
    assert rules["en"] == DeclineRule.single((0.9 + 0.1) / 2)
    assert rules["zh"] == DeclineRule.single((0.6 + 0.5) / 2)


def test_each_sets_answerable_questions_weigh_the_same_in_the_false_refusals() -> None:
    # 100 easy answerable questions of one set and 20 hard ones of another. Pooled, 8 % of 120
    # lets the rule decline 9 of the hard set's (45 % of it); weighed by set, each hard one
    # weighs five easy ones, and 3 of them (15 % of their set, 7.5 % of both) are the budget.
    easy = [Asked("zh", True, 0.9, True, "drcd") for _ in range(100)]
    hard = [Asked("zh", True, 0.4 + i / 1000, True, "xquad-zh") for i in range(20)]
    unanswerable = [Asked("zh", False, 0.3, True, "made")] * 10
    rule, figures = fit(easy + hard + unanswerable, "zh")
    assert rule == DeclineRule.single(pytest.approx((0.402 + 0.403) / 2))
    assert figures["false refusal"] == pytest.approx(0.075)
    assert figures["refusal"] == 1.0
    unnamed = [dataclasses.replace(a, source="") for a in easy + hard + unanswerable]
    pooled, pooled_figures = fit(unnamed, "zh")
    assert pooled == DeclineRule.single(pytest.approx((0.408 + 0.409) / 2))
    assert pooled_figures["false refusal"] == pytest.approx(9 / 120)
