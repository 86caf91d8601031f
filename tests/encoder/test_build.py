"""The model cache: built once, deterministically; a damaged or stale file is never run."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import onnx
import pytest

from citewell.encoder import E5Weights, MeanPooling, Recipe, cached_model
from citewell.encoder.build import Precision, build
from tests.encoder.stored_weights import largest_int8_weight

SMALL = Recipe("e5-small-1layer", 1, MeanPooling(), "fp32")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("precision", ["fp32", "int8", "int7"])
def test_the_build_is_deterministic(weights: E5Weights, tmp_path: Path, precision: str) -> None:
    recipe = Recipe("twice", 2, MeanPooling(), precision)  # type: ignore[arg-type]
    build(recipe, weights, tmp_path / "a.onnx")
    build(recipe, weights, tmp_path / "b.onnx")
    assert sha256(tmp_path / "a.onnx") == sha256(tmp_path / "b.onnx")


def test_int7_weights_leave_a_bit_free_so_no_cpu_saturates_their_products(
    weights: E5Weights, tmp_path: Path
) -> None:
    # Two 8-bit activations times two such weights sum to at most 2 * 255 * 64 = 32,640: within
    # the 16 bits a CPU without VNNI sums a pair in; 8-bit weights (127) are not.
    largest = {}
    precisions: tuple[Precision, ...] = ("int8", "int7")
    for precision in precisions:
        build(Recipe(precision, 1, MeanPooling(), precision), weights, tmp_path / precision)
        largest[precision] = largest_int8_weight(onnx.load(tmp_path / precision))
    assert largest == {"int8": 127, "int7": 64}


def test_a_built_model_is_reused_without_building(weights: E5Weights, tmp_path: Path) -> None:
    lines: list[str] = []
    first = cached_model(SMALL, weights, tmp_path, report=lines.append)
    assert lines[0] == f"building the e5-small-1layer model into {tmp_path} (once)"
    assert lines[1].startswith(f"built {first.name} in ")
    built_at = first.stat().st_mtime_ns
    again: list[str] = []
    assert cached_model(SMALL, weights, tmp_path, report=again.append) == first
    assert again == [] and first.stat().st_mtime_ns == built_at
    assert first.with_suffix(".sha256").read_text().strip() == sha256(first)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".lock", first.name, first.with_suffix(".sha256").name]
    )


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: path.write_bytes(path.read_bytes()[: path.stat().st_size // 2]),
        lambda path: path.write_bytes(b"\0" * 64 + path.read_bytes()[64:]),
        lambda path: path.unlink(),
        lambda path: path.with_suffix(".sha256").unlink(),
    ],
    ids=["truncated", "overwritten", "deleted", "hash-missing"],
)
def test_a_damaged_model_is_rebuilt(weights: E5Weights, tmp_path: Path, damage: object) -> None:
    model = cached_model(SMALL, weights, tmp_path)
    intact = sha256(model)
    damage(model)  # type: ignore[operator]
    lines: list[str] = []
    assert cached_model(SMALL, weights, tmp_path, report=lines.append) == model
    assert len(lines) == 2 and sha256(model) == intact


def test_other_models_are_kept_beside_it(weights: E5Weights, tmp_path: Path) -> None:
    one = cached_model(SMALL, weights, tmp_path)
    two = cached_model(Recipe("e5-small-2layers", 2, MeanPooling(), "fp32"), weights, tmp_path)
    assert one != two and one.exists() and two.exists()


def test_another_onnxruntime_makes_the_cache_stale(
    weights: E5Weights, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnxruntime

    before = cached_model(SMALL, weights, tmp_path)
    monkeypatch.setattr(onnxruntime, "__version__", "0.0.1")
    after = cached_model(SMALL, weights, tmp_path)
    assert after != before and after.exists()
    assert not before.exists() and not before.with_suffix(".sha256").exists()  # removed


def test_no_partial_file_is_left_by_a_failed_build(
    weights: E5Weights, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import citewell.encoder.build as building

    def fail(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(building, "build", fail)
    with pytest.raises(OSError, match="disk full"):
        cached_model(SMALL, weights, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [".lock"]


def test_citewell_models_build_builds_then_checks(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from citewell.cli import main

    first = CliRunner().invoke(main, ["models", "build", "--cache-dir", str(tmp_path)])
    assert first.exit_code == 0, first.output
    lines = first.output.splitlines()
    assert lines[0] == f"building the e5-small model into {tmp_path} (once)"
    (model,) = tmp_path.glob("e5-small-*.onnx")
    (reader,) = tmp_path.glob("citewell-reader-*.onnx")
    assert lines[2] == f"e5-small: {model} ({model.stat().st_size / 1e6:.1f} MB)"
    assert lines[3] == f"building the citewell-reader model into {tmp_path} (once)"
    assert lines[5] == f"citewell-reader: {reader} ({reader.stat().st_size / 1e6:.1f} MB)"
    again = CliRunner().invoke(
        main, ["models", "build"], env={"CITEWELL_MODEL_CACHE_DIR": str(tmp_path)}
    )
    assert again.exit_code == 0 and again.output.splitlines() == [lines[2], lines[5]]


def test_only_the_quantisers_advice_is_silenced(caplog: pytest.LogCaptureFixture) -> None:
    from citewell.encoder.build import _quiet_quantiser

    with _quiet_quantiser():
        logging.warning("Please consider to run pre-processing before quantization. Refer to …")
        logging.warning("a server's own warning")
    logging.warning("Please consider to run pre-processing before quantization. Again.")
    assert [r.getMessage() for r in caplog.records] == [
        "a server's own warning",
        "Please consider to run pre-processing before quantization. Again.",
    ]
