"""The blend: a calibrated probability from the reader's three signals, and the decline
threshold, both fit on data the network never trained on."""

from __future__ import annotations

import numpy as np
import pytest

from citewell.read.blend import SIGNALS, Blend
from citewell.read.training.calibrate import decline_threshold, fit_blend


def test_the_identity_blend_reads_the_network_alone() -> None:
    signals = np.array([[2.0, 0.9, 0.8], [-1.0, 0.1, 0.3]], dtype=np.float32)
    np.testing.assert_allclose(Blend().scores(signals), 1 / (1 + np.exp([-2.0, 1.0])), rtol=1e-6)


def test_a_blend_weighs_every_signal() -> None:
    with pytest.raises(ValueError, match="3 signals, not 2"):
        Blend((1.0, 2.0))
    blend = Blend((0.5, 2.0, -1.0), 0.25)
    assert Blend.from_spec(blend.spec()) == blend
    assert blend.spec()["signals"] == list(SIGNALS)


def test_fitting_recovers_the_weights_that_made_the_labels() -> None:
    rng = np.random.default_rng(0)
    signals = np.stack(
        [rng.normal(0, 3, 40_000), rng.uniform(0, 1, 40_000), rng.uniform(0.7, 0.95, 40_000)],
        axis=1,
    ).astype(np.float32)
    truth = Blend((0.8, 3.0, 10.0), -9.0)
    labels = (rng.uniform(size=len(signals)) < truth.scores(signals)).astype(int)
    fitted = fit_blend(signals, labels)
    np.testing.assert_allclose(fitted.weights, truth.weights, rtol=0.12)
    assert fitted.bias == pytest.approx(truth.bias, rel=0.12)


def test_a_signal_that_says_nothing_gets_no_weight() -> None:
    rng = np.random.default_rng(1)
    network = rng.normal(0, 2, 20_000)
    noise = rng.uniform(0, 1, 20_000)
    signals = np.stack([network, noise, noise * 0 + 0.8], axis=1).astype(np.float32)
    labels = (rng.uniform(size=len(network)) < 1 / (1 + np.exp(-network))).astype(int)
    fitted = fit_blend(signals, labels)
    assert fitted.weights[0] == pytest.approx(1.0, abs=0.08)
    assert abs(fitted.weights[1]) < 0.15


def test_a_signal_that_argues_against_gets_no_weight_and_the_others_are_refit() -> None:
    rng = np.random.default_rng(2)
    network = rng.normal(0, 2, 20_000)
    overlap = rng.uniform(0, 1, 20_000)
    cosine = rng.uniform(0.7, 0.95, 20_000)
    truth = Blend((1.0, -3.0, 8.0), -5.0)  # more shared words, less likely: a data set's quirk
    signals = np.stack([network, overlap, cosine], axis=1).astype(np.float32)
    labels = (rng.uniform(size=len(signals)) < truth.scores(signals)).astype(int)
    fitted = fit_blend(signals, labels)
    assert fitted.weights[1] == 0.0
    assert fitted.weights[0] > 0.5  # the others still carry their evidence, a little
    assert fitted.weights[2] > 4.0  # attenuated by the omitted signal's variance


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
