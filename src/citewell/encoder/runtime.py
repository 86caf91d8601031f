"""Running a built encoder: token ids in, one output row per sequence, by onnxruntime.

Sequences are run in batches of similar length, so padding wastes little work. With a
dynamically quantised model the activations' int8 scale is computed per call over the whole
batch, so a sequence's output would depend on its batch-mates; ``batch_tokens=0`` runs each
sequence alone, which makes every output a function of its own tokens only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime

from citewell.encoder.weights import WordEmbeddings

__all__ = ["EncoderSession", "session_options"]

Floats = npt.NDArray[np.float32]


def session_options(threads: int) -> onnxruntime.SessionOptions:
    """``threads`` for one operator, none spinning while idle (the cores are shared)."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # warnings about unused initialisers are not the user's
    return options


class EncoderSession:
    """A built encoder model with its word embeddings."""

    def __init__(
        self, model: Path, words: WordEmbeddings, *, threads: int, batch_tokens: int
    ) -> None:
        self._session = onnxruntime.InferenceSession(
            str(model),
            session_options(threads),
            providers=["CPUExecutionProvider"],
            # Fusing the residual add into the layer norm made e5-small 13 % slower here.
            disabled_optimizers=["SkipLayerNormFusion"],
        )
        self._words = words
        self._batch_tokens = batch_tokens

    def run(self, sequences: Sequence[Sequence[int]]) -> Floats:
        """The graph's output for each sequence (ids with their special tokens), in order."""
        order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
        rows: list[Floats] = [np.empty(0, dtype=np.float32)] * len(sequences)
        for batch in self._batches([sequences[i] for i in order]):
            for offset, row in enumerate(self._run(batch)):
                rows[order[batch.start + offset]] = row
        return np.stack(rows) if rows else np.empty((0, 0), dtype=np.float32)

    def _batches(self, ordered: list[Sequence[int]]) -> Iterator[_Batch]:
        start = 0
        while start < len(ordered):
            end = start + 1
            # sorted by length, so the last sequence sets the padded width
            while (
                end < len(ordered) and len(ordered[end]) * (end + 1 - start) <= self._batch_tokens
            ):
                end += 1
            yield _Batch(start, ordered[start:end])
            start = end

    def _run(self, batch: _Batch) -> Floats:
        width = len(batch.sequences[-1])
        ids = np.zeros((len(batch.sequences), width), dtype=np.int64)
        mask = np.zeros((len(batch.sequences), width), dtype=np.float32)
        for row, sequence in enumerate(batch.sequences):
            ids[row, : len(sequence)] = sequence
            mask[row, : len(sequence)] = 1.0
        (output,) = self._session.run(None, {"embeddings": self._words.rows(ids), "mask": mask})
        return np.asarray(output, dtype=np.float32)


class _Batch:
    __slots__ = ("sequences", "start")

    def __init__(self, start: int, sequences: list[Sequence[int]]) -> None:
        self.start = start
        self.sequences = sequences
