"""The reader's delta: stored small, read only under its stated hash, merged exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from citewell.encoder import E5Weights, FirstTokenLinear, Recipe
from citewell.errors import ConfigError
from citewell.read.delta import LINEARS, NORMS, ReaderDelta


def small_delta(index: int = 1, rank: int = 2, seed: int = 0) -> ReaderDelta:
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    shapes = {
        "query": (384, 384),
        "key": (384, 384),
        "value": (384, 384),
        "attention_out": (384, 384),
        "ffn_in": (384, 1536),
        "ffn_out": (1536, 384),
    }
    for name in LINEARS:
        inputs, outputs = shapes[name]
        arrays[f"layer{index}.{name}.down"] = rng.normal(size=(inputs, rank)).astype(np.float32)
        arrays[f"layer{index}.{name}.up"] = rng.normal(size=(rank, outputs)).astype(np.float32)
        arrays[f"layer{index}.{name}.bias"] = rng.normal(size=outputs).astype(np.float32)
    for name in NORMS:
        arrays[f"layer{index}.{name}.scale"] = rng.normal(size=384).astype(np.float32)
        arrays[f"layer{index}.{name}.shift"] = rng.normal(size=384).astype(np.float32)
    arrays["head.weight"] = rng.normal(size=(384, 2)).astype(np.float32)
    arrays["head.bias"] = rng.normal(size=2).astype(np.float32)
    return ReaderDelta.from_arrays(arrays, layers=2)


def test_adapters_are_stored_as_float16_and_the_rest_as_float32() -> None:
    delta = small_delta()
    assert delta.arrays["layer1.query.down"].dtype == np.float16
    assert delta.arrays["layer1.query.up"].dtype == np.float16
    assert delta.arrays["layer1.query.bias"].dtype == np.float32
    assert delta.arrays["head.weight"].dtype == np.float32
    assert delta.adapted == frozenset({1})


def test_a_written_delta_reads_back_under_its_hash(tmp_path: Path) -> None:
    delta = small_delta()
    sha256 = delta.write(tmp_path / "reader.npz")
    again = ReaderDelta.read(tmp_path / "reader.npz", sha256)
    assert again.layers == 2 and again.sha256 == delta.sha256
    assert sorted(again.arrays) == sorted(delta.arrays)
    assert delta.write(tmp_path / "twice.npz") == sha256  # the same arrays, the same bytes


def test_a_delta_whose_hash_differs_is_refused(tmp_path: Path) -> None:
    small_delta().write(tmp_path / "reader.npz")
    with pytest.raises(ConfigError, match="not the 00"):
        ReaderDelta.read(tmp_path / "reader.npz", "00" * 32)


def test_the_adapters_merge_into_the_weights(weights: E5Weights) -> None:
    delta = small_delta()
    base = weights.layer(1)
    merged = delta.adapted_layer(1, base)
    down = delta.arrays["layer1.ffn_in.down"].astype(np.float32)
    up = delta.arrays["layer1.ffn_in.up"].astype(np.float32)
    np.testing.assert_allclose(merged.ffn_in[0], base.ffn_in[0] + down @ up, rtol=1e-6)
    np.testing.assert_array_equal(merged.ffn_in[1], delta.arrays["layer1.ffn_in.bias"])
    np.testing.assert_array_equal(merged.output_norm[0], delta.arrays["layer1.output_norm.scale"])
    untouched = weights.layer(0)
    assert delta.adapted_layer(0, untouched) is untouched


def test_the_delta_is_part_of_what_a_build_is_keyed_by(weights: E5Weights) -> None:
    head = FirstTokenLinear(np.zeros((384, 2), np.float32), np.zeros(2, np.float32))
    plain = Recipe("reader", 2, head, "fp32")
    one = Recipe("reader", 2, head, "fp32", changes=small_delta(seed=1))
    two = Recipe("reader", 2, head, "fp32", changes=small_delta(seed=2))
    assert len({plain.key(weights), one.key(weights), two.key(weights)}) == 3


def test_the_shipped_delta_is_small_and_its_card_vouches_for_it() -> None:
    from citewell.read.cross_encoder import ReaderCard

    card = ReaderCard.shipped()
    delta = card.read_delta()  # raises if the file is not the one the card states
    path = Path(__file__).parents[2] / "src" / "citewell" / "read" / card.delta
    assert path.stat().st_size < 3_000_000
    assert card.fields["base"]["licence"] == "MIT" and card.fields["licence"].startswith("MIT")
    trained_on = " ".join(d["set"] for d in card.fields["training_data"]).lower()
    assert "scifact" not in trained_on and "rgb" not in trained_on
    assert delta.adapted == frozenset(card.fields["adapted_layers"])
