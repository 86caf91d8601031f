"""The blend: a calibrated probability from the reader's three signals, and the decline
threshold, both fit on data the network never trained on."""

from __future__ import annotations

import numpy as np
import pytest

from citewell.read.blend import SIGNALS, Blend
from citewell.read.training.calibrate import fit_blend


def test_the_identity_blend_reads_the_network_alone() -> None:
    signals = np.array([[2.0, 0.9, 0.8], [-1.0, 0.1, 0.3]], dtype=np.float32)
    np.testing.assert_allclose(Blend().scores(signals), 1 / (1 + np.exp([-2.0, 1.0])), rtol=1e-6)


def test_a_blend_weighs_every_signal() -> None:
    with pytest.raises(ValueError, match="3 signals, not 2"):
        Blend((1.0, 2.0))
    blend = Blend((0.5, 2.0, -1.0), 0.25)
    assert Blend.from_spec(blend.spec()) == blend
    assert blend.spec()["signals"] == list(SIGNALS)


def test_a_blend_says_which_signals_its_score_depends_on() -> None:
    # The reader skips e5's pass per candidate for a task whose blends give its cosine no weight.
    assert Blend().weighs("network") and not Blend().weighs("cosine")
    assert Blend((0.4, 2.4, 0.0)).weighs("overlap") and not Blend((0.4, 2.4, 0.0)).weighs("cosine")


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
