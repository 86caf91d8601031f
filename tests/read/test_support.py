"""The support threshold fitted on the calibration part: per language, the one that best tells
supported claims' citations from unsupported ones, each side weighed by its own count."""

from __future__ import annotations

from citewell.read.training.support import fit_support_thresholds


def test_the_threshold_lies_where_supported_and_unsupported_claims_part() -> None:
    scores = [0.9, 0.8, 0.3, 0.35, 0.2, 0.1]
    labels = [True, True, True, False, False, False]
    thresholds, figures = fit_support_thresholds(scores, labels, ["en"] * 6)
    assert thresholds == {"en": 0.25, "*": 0.25}  # keeps 0.3 and the unsupported 0.35
    assert figures["en"] == {
        "supported": 3,
        "unsupported": 3,
        "threshold": 0.25,
        "supported kept": 1.0,
        "unsupported dropped": 0.6667,
    }


def test_each_side_weighs_by_its_own_count_not_by_how_many_pairs_it_has() -> None:
    # One supported claim at 0.3 among 10 unsupported ones at 0.4: keeping it costs a tenth of
    # the unsupported side, dropping it the whole supported side.
    scores = [0.3, *[0.4] * 10, *[0.1] * 10]
    labels = [True, *[False] * 20]
    thresholds, figures = fit_support_thresholds(scores, labels, ["es"] * 21)
    assert thresholds["es"] == 0.2
    assert figures["es"]["supported kept"] == 1.0
    assert figures["es"]["unsupported dropped"] == 0.5


def test_each_language_gets_its_own_threshold_and_any_other_the_pooled_one() -> None:
    english = ([0.8, 0.7, 0.6, 0.5], [0.3, 0.2])
    chinese = ([0.3, 0.25, 0.2, 0.15], [0.1, 0.05])
    scores = [*english[0], *english[1], *chinese[0], *chinese[1]]
    labels = [True] * 4 + [False] * 2 + [True] * 4 + [False] * 2
    thresholds, figures = fit_support_thresholds(scores, labels, ["en"] * 6 + ["zh"] * 6)
    assert thresholds["en"] == 0.4  # midway between 0.5 and 0.3
    assert thresholds["zh"] == 0.125
    assert figures["*"]["supported kept"] == 1.0
    assert figures["*"]["threshold"] == thresholds["*"]
    assert all(f["supported kept"] == 1.0 for f in figures.values())


def test_the_cards_four_decimals_keep_what_the_fit_kept() -> None:
    # 0.300025 would part the supported 0.30004 from the unsupported 0.30001; written as 0.3000
    # on the card it would not, so the fit does not count on it.
    scores = [0.30004, 0.30001, 0.9, 0.1]
    thresholds, figures = fit_support_thresholds(scores, [True, False, True, False], ["en"] * 4)
    assert thresholds["en"] == 0.2
    assert (figures["en"]["supported kept"], figures["en"]["unsupported dropped"]) == (1.0, 0.5)


def test_a_language_with_one_kind_of_claim_only_gets_no_threshold_of_its_own() -> None:
    thresholds, _ = fit_support_thresholds([0.9, 0.1, 0.8], [True, False, True], ["en", "en", "es"])
    assert set(thresholds) == {"en", "*"}
