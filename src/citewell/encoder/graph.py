"""The encoder as an ONNX graph, written from the weights: no torch, no exporter.

Input ``embeddings`` (batch, length, hidden) are the word embeddings of the tokens, looked up
outside the graph (``WordEmbeddings``: the 96M-parameter table stays 4-bit in the memory map
instead of a 384 MB constant); ``mask`` (batch, length) is 1 for a token and 0 for padding. The
graph adds the position and token-type embeddings, runs ``layers`` post-norm transformer layers
(fewer than the model has: a truncated variant) and ends in a head:

- ``MeanPooling``: ``pooled`` (batch, hidden), the mean of the last hidden states over the
  tokens; what e5 embeds with (not yet unit length: long texts average several windows first).
- ``FirstTokenLinear``: ``logits`` (batch, outputs) from the first token's (``<s>``) state; the
  head of a cross-encoder that reads a (question, passage) pair. The last layer computes that
  state alone (attending to every token): the others' would be thrown away.

A product may take some input channels apart (``apart``): e5-small's first layers each have one
feed-forward channel whose activations run 10-100 times larger than the rest, and one int8 scale
per call cannot hold both. Such a product is written as two: the other channels' product (named
``<name>.product``, quantised like any other) and the outliers' own small product in fp32
(``<name>.apart``), which sum to the same product.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from citewell.encoder.weights import Layer

__all__ = ["OPSET", "EncoderParts", "FirstTokenLinear", "Head", "MeanPooling", "encoder_graph"]

OPSET = 20  # the first with a standard Gelu
_MASKED = -1e9  # added to the attention score of a padding position

Floats = npt.NDArray[np.float32]


@dataclass(frozen=True)
class MeanPooling:
    """Mean of the last hidden states over the tokens."""


@dataclass(frozen=True)
class FirstTokenLinear:
    """``state(<s>) @ weight + bias``: weight (hidden, outputs), bias (outputs,)."""

    weight: Floats
    bias: Floats


Head = MeanPooling | FirstTokenLinear


@dataclass(frozen=True)
class EncoderParts:
    """What the graph is written from: the embedding tables after the word lookup, the layers."""

    positions: Floats  # (max_positions, hidden); position p of a window is row p
    token_type: Floats  # (hidden,): the one token type e5 uses
    embedding_norm: tuple[Floats, Floats]
    layers: Sequence[Layer]
    heads: int
    layer_norm_eps: float


def encoder_graph(
    parts: EncoderParts, head: Head, apart: Mapping[str, Sequence[int]] | None = None
) -> onnx.ModelProto:
    """The ONNX model of ``parts`` with ``head``; the same inputs give the same bytes.
    ``apart``: by product (``layer0.ffn_out``), the input channels it multiplies apart."""
    builder = _Builder(parts.layer_norm_eps, apart or {})
    hidden = parts.positions.shape[1]
    x = builder.embed(parts)
    bias = builder.attention_bias()
    last = len(parts.layers) - 1
    for index, layer in enumerate(parts.layers):
        # The first-token head reads one state of the last layer: only <s> asks there.
        first_only = index == last and isinstance(head, FirstTokenLinear)
        x = builder.layer(f"layer{index}", x, bias, layer, parts.heads, hidden, first_only)
    if isinstance(head, MeanPooling):
        output = builder.mean_pool(x, hidden)
        outputs = [helper.make_tensor_value_info(output, TensorProto.FLOAT, ["batch", hidden])]
    else:
        output = builder.first_token_linear(x, head)
        width = head.weight.shape[1]
        outputs = [helper.make_tensor_value_info(output, TensorProto.FLOAT, ["batch", width])]
    inputs = [
        helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "length", hidden]),
        helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "length"]),
    ]
    graph = helper.make_graph(builder.nodes, "citewell-encoder", inputs, outputs, builder.constants)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="citewell"
    )
    model.ir_version = 9  # what onnxruntime reads since 1.15
    onnx.checker.check_model(model)
    return model


class _Builder:
    """Nodes and constants, each named after its place in the encoder."""

    def __init__(self, eps: float, apart: Mapping[str, Sequence[int]]) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.constants: list[onnx.TensorProto] = []
        self._eps = eps
        self._apart = apart

    def constant(self, name: str, value: npt.NDArray[np.generic]) -> str:
        self.constants.append(numpy_helper.from_array(np.asarray(value, order="C"), name))
        return name

    def op(self, kind: str, inputs: Sequence[str], name: str, **attributes: Any) -> str:
        self.nodes.append(helper.make_node(kind, list(inputs), [name], name=name, **attributes))
        return name

    def ints(self, name: str, *values: int) -> str:
        return self.constant(name, np.array(values, dtype=np.int64))

    def embed(self, parts: EncoderParts) -> str:
        positions = self.constant("embedding.positions", parts.positions)
        length = self.op("Shape", ["embeddings"], "embedding.length", start=1, end=2)
        window = self.op(
            "Slice",
            [positions, self.ints("zero", 0), length, self.ints("axis0", 0)],
            "embedding.window",
        )
        x = self.op("Add", ["embeddings", window], "embedding.with_positions")
        token_type = self.constant("embedding.token_type", parts.token_type)
        x = self.op("Add", [x, token_type], "embedding.with_type")
        return self.norm("embedding.norm", x, parts.embedding_norm)

    def attention_bias(self) -> str:
        """(batch, 1, 1, length): 0 over tokens, a large negative over padding."""
        one = self.constant("one", np.array(1.0, dtype=np.float32))
        padding = self.op("Sub", [one, "mask"], "attention.padding")
        masked = self.constant("attention.masked", np.array(_MASKED, dtype=np.float32))
        bias = self.op("Mul", [padding, masked], "attention.bias_flat")
        return self.op("Unsqueeze", [bias, self.ints("axes12", 1, 2)], "attention.bias")

    def layer(
        self,
        name: str,
        x: str,
        bias: str,
        layer: Layer,
        heads: int,
        hidden: int,
        first_only: bool = False,
    ) -> str:
        """The layer's output states; with ``first_only``, the first token's alone (every token
        is still attended to)."""
        size = hidden // heads
        split = self.ints(f"{name}.split_shape", 0, 0, heads, size)
        merged = self.ints(f"{name}.merged_shape", 0, 0, hidden)

        def projection(
            part: str, source: str, weights: tuple[Floats, Floats], perm: list[int]
        ) -> str:
            y = self.linear(f"{name}.{part}", source, weights)
            y = self.op("Reshape", [y, split], f"{name}.{part}.heads")
            return self.op("Transpose", [y], f"{name}.{part}.by_head", perm=perm)

        asking = x
        if first_only:
            one = self.ints(f"{name}.one", 1)
            asking = self.op(
                "Slice", [x, self.ints(f"{name}.start", 0), one, one], f"{name}.first_token"
            )
        query = projection("query", asking, layer.query, [0, 2, 1, 3])  # (b, h, s, d)
        key = projection("key", x, layer.key, [0, 2, 3, 1])  # (b, h, d, s)
        value = projection("value", x, layer.value, [0, 2, 1, 3])
        scores = self.op("MatMul", [query, key], f"{name}.scores")
        scale = self.constant(f"{name}.scale", np.array(1 / np.sqrt(size), dtype=np.float32))
        scores = self.op("Mul", [scores, scale], f"{name}.scaled")
        scores = self.op("Add", [scores, bias], f"{name}.masked")
        weights = self.op("Softmax", [scores], f"{name}.attention", axis=-1)
        context = self.op("MatMul", [weights, value], f"{name}.context")
        context = self.op("Transpose", [context], f"{name}.context.by_token", perm=[0, 2, 1, 3])
        context = self.op("Reshape", [context, merged], f"{name}.context.merged")
        attended = self.linear(f"{name}.attention_out", context, layer.attention_out)
        x = self.op("Add", [asking, attended], f"{name}.attention_residual")
        x = self.norm(f"{name}.attention_norm", x, layer.attention_norm)
        inner = self.linear(f"{name}.ffn_in", x, layer.ffn_in)
        inner = self.op("Gelu", [inner], f"{name}.gelu")
        out = self.linear(f"{name}.ffn_out", inner, layer.ffn_out)
        x = self.op("Add", [x, out], f"{name}.ffn_residual")
        return self.norm(f"{name}.output_norm", x, layer.output_norm)

    def linear(self, name: str, x: str, weights: tuple[Floats, Floats]) -> str:
        matrix, bias = weights
        channels = list(self._apart.get(name, ()))
        if not channels:
            product = self.op(
                "MatMul", [x, self.constant(f"{name}.weight", matrix)], f"{name}.product"
            )
            return self.op("Add", [product, self.constant(f"{name}.bias", bias)], name)
        # The outliers zeroed in the input, so that the quantiser's scale for it (its largest
        # value) fits the other channels; their rows zeroed in the matrix are multiplied apart.
        others = np.ones(matrix.shape[0], dtype=np.float32)
        others[channels] = 0.0
        rest = self.op("Mul", [x, self.constant(f"{name}.others", others)], f"{name}.others_in")
        rest_matrix = matrix * others[:, None]
        product = self.op(
            "MatMul", [rest, self.constant(f"{name}.weight", rest_matrix)], f"{name}.product"
        )
        outliers = self.op(
            "Gather",
            [x, self.constant(f"{name}.channels", np.array(channels, dtype=np.int64))],
            f"{name}.apart_in",
            axis=-1,
        )
        apart = self.op(
            "MatMul",
            [outliers, self.constant(f"{name}.apart_weight", matrix[channels])],
            f"{name}.apart",
        )
        summed = self.op("Add", [product, apart], f"{name}.summed")
        return self.op("Add", [summed, self.constant(f"{name}.bias", bias)], name)

    def norm(self, name: str, x: str, weights: tuple[Floats, Floats]) -> str:
        scale = self.constant(f"{name}.scale", weights[0])
        shift = self.constant(f"{name}.shift", weights[1])
        return self.op("LayerNormalization", [x, scale, shift], name, axis=-1, epsilon=self._eps)

    def mean_pool(self, x: str, hidden: int) -> str:
        weights = self.op("Unsqueeze", ["mask", self.ints("axis2", 2)], "pool.weights")
        summed = self.op(
            "ReduceSum",
            [self.op("Mul", [x, weights], "pool.masked"), self.ints("axis1", 1)],
            "pool.sum",
            keepdims=0,
        )
        count = self.op("ReduceSum", [weights, "axis1"], "pool.count", keepdims=0)
        return self.op("Div", [summed, count], "pooled")

    def first_token_linear(self, x: str, head: FirstTokenLinear) -> str:
        first = self.op(
            "Gather",
            [x, self.constant("first", np.array(0, dtype=np.int64))],
            "head.first_token",
            axis=1,
        )
        return self.linear("logits", first, (head.weight, head.bias))
